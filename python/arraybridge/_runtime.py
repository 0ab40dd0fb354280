"""How the runtime is created (_core holds it), and the exceptions for failed calls."""
import atexit
import os

from ._errors import class_for_status, last_problem, status_name
from ._kinds import DISABLING
from ._lib import _core


def _disabled(name):
    """Whether the variable asks for a backend left out: any value but unset, empty, 0
    and the words that mean no (=false disabled CUDA: the process hunt)."""
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


def runtime_flags():
    """abr_runtime_options.flags from the environment: ARRAYBRIDGE_DISABLE_OPENCL=1 or
    ARRAYBRIDGE_DISABLE_CUDA=1 leave a backend out."""
    flags = 0
    for variable, flag in DISABLING.items():
        if _disabled(variable):
            flags |= flag
    return flags


# The C options' names, as a Python caller spells what it asked for.
_OPTION_WORDS = {"ABR_COPY_NEVER": "copy=False", "ABR_COPY_ALWAYS": "copy=True",
                 "ABR_TRANSFER_NO_HOST_STAGING": "host_staging=False", "ABR_TRANSFER_REQUIRE_CONTIGUOUS": "contiguous=True",
                 "ABR_TRANSFER_NO_NEGATIVE_STRIDES": 'contiguous="nonnegative"'}


# A batch item's place: to_device's x[777], copy's src[7] and dst[7].
_PLACE_WORDS = {"to": {"srcs[": "x["}, "copy": {"srcs[": "src[", "dsts[": "dst["}}


def user_words(message, context=""):
    """The library's message in the words of the Python call: the options as its
    keywords (copy=False, not ABR_COPY_NEVER), and a flag the package set named as
    the variable the user set ("disabled by ARRAYBRIDGE_DISABLE_OPENCL=1 in the
    environment ...")."""
    for option, words in _OPTION_WORDS.items():
        message = message.replace(option, words)
    for place, words in _PLACE_WORDS["copy" if context.startswith("copy") else "to"].items():
        message = message.replace(place, words)
    for variable in DISABLING:
        flag = "ABR_RUNTIME_DISABLE_" + variable[len("ARRAYBRIDGE_DISABLE_"):]  # the library's name for it
        if flag in message and _disabled(variable):
            message = message.replace(f"disabled by {flag}", f"disabled by {variable}={os.environ[variable]} in the "
                                      "environment (unset it or set it to 0 to use it)")
    return message


def error(status, context):
    """The exception for a failed call, carrying the runtime's message for this thread."""
    message = user_words(last_problem(), context)
    name = status_name(status)
    return class_for_status(status)(f"{context}: {message}" if message else f"{context}: {name}", status, name)


# The runtime lives until the process exits: destroying it at exit would pull it
# from under daemon threads still converting, and the operating system reclaims it
# anyway. Its idle pinned blocks are given back at exit, while the CUDA context
# still lives (a leak checker then sees only blocks that tensors alive at exit hold).
atexit.register(_core.pool_trim, True)
