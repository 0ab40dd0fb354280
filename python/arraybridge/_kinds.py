"""The device kinds and backends the library knows (abr_device_kind_get): the
package names devices, backends and the variables that disable them from the
library's own table, not from a list of its own."""
from collections import namedtuple

from ._lib import ffi, lib

Kind = namedtuple("Kind", "name type backend backend_name numbered disable_flag disable_env addresses dlpack_streams "
                         "host_memory")


def _read_kinds():
    count = ffi.new("int32_t*")
    if lib.abr_device_kind_count(count) != lib.ABR_OK:
        raise RuntimeError("arraybridge: abr_device_kind_count failed")
    kinds = []
    for index in range(count[0]):
        kind = ffi.new("abr_device_kind*")
        if (lib.abr_device_kind_init(kind, lib.ABR_DEVICE_KIND_VERSION) != lib.ABR_OK or
                lib.abr_device_kind_get(index, kind) != lib.ABR_OK):
            raise RuntimeError(f"arraybridge: abr_device_kind_get({index}) failed")
        kinds.append(Kind(ffi.string(kind.name).decode(), int(kind.type), int(kind.backend),
                          ffi.string(kind.backend_name).decode(), bool(kind.flags & lib.ABR_KIND_NUMBERED),
                          int(kind.disable_flag), ffi.string(kind.disable_env).decode(),
                          bool(kind.flags & lib.ABR_KIND_ADDRESSES), bool(kind.flags & lib.ABR_KIND_DLPACK_STREAMS),
                          bool(kind.flags & lib.ABR_KIND_HOST_MEMORY)))
    return kinds


KINDS = _read_kinds()
# abr_backend value -> its name ("cuda"), the host first.
BACKENDS = {kind.backend: kind.backend_name for kind in KINDS}
# The variable that disables a backend -> its abr_runtime_options flag.
DISABLING = {kind.disable_env: kind.disable_flag for kind in KINDS if kind.disable_env}
# Device types whose queues DLPack's stream= values name (a consumer's stream orders work there).
DLPACK_STREAMS = frozenset(kind.type for kind in KINDS if kind.dlpack_streams)
# Device types whose memory the host reads in place (cpu, cuda_host).
HOST_READABLE = frozenset(kind.type for kind in KINDS if kind.host_memory)
# Device types whose DLTensor.data is a handle (a cl_mem), not an address.
HANDLES = frozenset(kind.type for kind in KINDS if not kind.addresses)
