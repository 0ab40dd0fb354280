# ArrayBridge.jl: libarraybridge from Julia through `ccall`, mirroring the C
# declarations that rust/arraybridge/tests/layout.rs checks byte for byte. Julia is not installed
# on the project's build machine, so this module is NOT tested in CI; it is kept
# small and exact. Usage (after `make`):
#
#   push!(LOAD_PATH, "julia"); using ArrayBridge
#   rt = ArrayBridge.Runtime()
#   x = Float32[1, 2, 3, 4]
#   back = ArrayBridge.round_trip(rt, x, ArrayBridge.opencl(0))   # host -> opencl:0 -> host
#   @assert back == x
#   close(rt)
module ArrayBridge

const lib = get(ENV, "ARRAYBRIDGE_LIBRARY", joinpath(@__DIR__, "..", "build", "lib", "libarraybridge.so"))

# ---------------------------------------------------------------- DLPack 1.x
struct DLPackVersion; major::UInt32; minor::UInt32; end
struct DLDevice; device_type::Int32; device_id::Int32; end
struct DLDataType; code::UInt8; bits::UInt8; lanes::UInt16; end
struct DLTensor
    data::Ptr{Cvoid}; device::DLDevice; ndim::Int32; dtype::DLDataType
    shape::Ptr{Int64}; strides::Ptr{Int64}; byte_offset::UInt64
end
struct DLManagedTensorVersioned
    version::DLPackVersion; manager_ctx::Ptr{Cvoid}; deleter::Ptr{Cvoid}; flags::UInt64; dl_tensor::DLTensor
end

const kDLCPU = Int32(1)
const kDLOpenCL = Int32(4)
const kDLFloat = UInt8(2)
const ABR_OK = Int32(0)
const ABR_COPY_ALWAYS = Int32(1)

struct abr_transfer_options
    version::UInt32; copy::Int32; flags::UInt32; dtype::DLDataType; report::Ptr{Cvoid}
end

@assert sizeof(DLTensor) == 48 && sizeof(DLManagedTensorVersioned) == 80 && sizeof(abr_transfer_options) == 24

cpu() = DLDevice(kDLCPU, 0)
opencl(id::Integer) = DLDevice(kDLOpenCL, Int32(id))

struct Error <: Exception; status::Int32; message::String; end
Base.showerror(io::IO, e::Error) = print(io, "libarraybridge: ", e.message, " (status ", e.status, ")")
check(status::Int32) = status == ABR_OK ? nothing :
    throw(Error(status, unsafe_string(ccall((:abr_last_error, lib), Cstring, ()))))

mutable struct Runtime
    handle::Ptr{Cvoid}
    function Runtime()
        out = Ref{Ptr{Cvoid}}(C_NULL)
        check(ccall((:abr_runtime_create, lib), Int32, (Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), C_NULL, out))
        finalizer(close, new(out[]))
    end
end
function Base.close(rt::Runtime)
    rt.handle == C_NULL || ccall((:abr_runtime_destroy, lib), Cvoid, (Ptr{Cvoid},), rt.handle)
    rt.handle = C_NULL
end

version() = unsafe_string(ccall((:abr_version_string, lib), Cstring, ()))

# Moves a borrowed Float32 vector to `device` and back, returning the copy. The
# source has no deleter: Julia keeps `x` alive (GC.@preserve) across the calls, and
# `rt` too (its finalizer destroys the runtime a call is still using).
function round_trip(rt::Runtime, x::Vector{Float32}, device::DLDevice)
    shape = Int64[length(x)]
    options = Ref(abr_transfer_options(1, ABR_COPY_ALWAYS, 0, DLDataType(0, 0, 0), C_NULL))
    GC.@preserve rt x shape begin
        tensor = DLTensor(pointer(x), cpu(), 1, DLDataType(kDLFloat, 32, 1), pointer(shape), C_NULL, 0)
        src = Ref(DLManagedTensorVersioned(DLPackVersion(1, 3), C_NULL, C_NULL, 0, tensor))
        on_device = Ref{Ptr{DLManagedTensorVersioned}}(C_NULL)
        check(ccall((:abr_to_device, lib), Int32,
                    (Ptr{Cvoid}, Ptr{DLManagedTensorVersioned}, DLDevice, Ref{abr_transfer_options}, Ptr{Cvoid},
                     Ptr{Ptr{DLManagedTensorVersioned}}), rt.handle, src, device, options, C_NULL, on_device))
        back = Ref{Ptr{DLManagedTensorVersioned}}(C_NULL)
        status = ccall((:abr_to_device, lib), Int32,
                       (Ptr{Cvoid}, Ptr{DLManagedTensorVersioned}, DLDevice, Ref{abr_transfer_options}, Ptr{Cvoid},
                        Ptr{Ptr{DLManagedTensorVersioned}}), rt.handle, on_device[], cpu(), options, C_NULL, back)
        if status != ABR_OK  # the device tensor is still ours: delete it before raising
            error = Error(status, unsafe_string(ccall((:abr_last_error, lib), Cstring, ())))
            ccall(unsafe_load(on_device[]).deleter, Cvoid, (Ptr{DLManagedTensorVersioned},), on_device[])
            throw(error)
        end
        managed = unsafe_load(back[])
        result = copy(unsafe_wrap(Array, Ptr{Float32}(managed.dl_tensor.data + managed.dl_tensor.byte_offset),
                                  length(x)))
        ccall(managed.deleter, Cvoid, (Ptr{DLManagedTensorVersioned},), back[])
        return result
    end
end

end # module
