"""Stream arguments: DLPack stream values and frameworks' stream objects."""


def stream_handle(stream):
    """The CUDA stream handle for a DLPack stream value or a framework's stream object
    (CuPy's .ptr, PyTorch's .cuda_stream); 0 for none."""
    if stream is None or stream == -1:
        return 0
    if not isinstance(stream, int):
        native = getattr(stream, "cuda_stream", getattr(stream, "ptr", None))
        if not isinstance(native, int):
            raise TypeError(f"arraybridge: stream must be None, an int (a DLPack stream value) or a CUDA stream "
                            f"object with .ptr or .cuda_stream, not {type(stream).__name__}")
        if not 0 <= native < 2**64:
            raise ValueError(f"arraybridge: the stream object's handle {native} is not a pointer (0 to 2**64 - 1)")
        return native or 1  # a framework's null stream is the legacy default stream: DLPack's 1
    if stream == 0:
        raise ValueError("arraybridge: stream=0 is not a DLPack stream value: 0 is ambiguous, so pass 1 for "
                         "the legacy default stream, 2 for the per-thread one, or a stream handle (below 2**64)")
    if stream < -1 or stream >= 2**64:
        raise ValueError(f"arraybridge: stream={stream} is not a DLPack stream value: -1 (none), 1 (the legacy "
                         "default stream), 2 (the per-thread one) or a stream handle from 3 to 2**64 - 1")
    return stream
