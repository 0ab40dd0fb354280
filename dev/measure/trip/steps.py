# gdb -x: steps line by line through the second abr_to_device of one_transfer.c and
# prints the project files it passes through, in order, one line each (TRAIL <file>).
import os

import gdb

ROOT = os.environ["TRIP_ROOT"].rstrip("/") + "/"
PROJECT = ("lib/", "capi/", "opencl/", "cuda/")
for command in ("set pagination off", "set confirm off", "skip -gfi /usr/*", "skip -gfi */fmt/*",
                "skip -gfi */spdlog/*", "skip -gfi */dlpack/*", "break abr_to_device", "run",
                "continue"):  # the second call: the first warmed up devices and caches
    gdb.execute(command, to_string=True)
start = gdb.selected_frame().older()
for _ in range(200000):
    sal = gdb.selected_frame().find_sal()
    name = sal.symtab.fullname() if sal.symtab else ""
    if name.startswith(ROOT) and name[len(ROOT):].startswith(PROJECT):
        print("TRAIL", name[len(ROOT):])
    try:
        gdb.execute("step", to_string=True)
    except gdb.error:
        break
    frame = gdb.selected_frame()
    if frame == start or frame.name() == "main":
        break
gdb.execute("kill")
