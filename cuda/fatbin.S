/* The kernels of kernels.cu as nvcc built them (sm_80, sm_90 and PTX for newer
 * GPUs), embedded in the library so that nothing but the driver is needed at
 * run time. ABR_CUDA_FATBIN is the file's path, given by the Makefile. The
 * section is the one nvcc's own objects use, where cuobjdump and other CUDA
 * tools look for a library's device code (read-only data, loaded with it). */
        .section .nv_fatbin, "a"
        .balign 64
        .globl abr_cuda_fatbin
        .hidden abr_cuda_fatbin
        .type abr_cuda_fatbin, @object
abr_cuda_fatbin:
        .incbin ABR_CUDA_FATBIN
        .size abr_cuda_fatbin, . - abr_cuda_fatbin
        .section .note.GNU-stack,"",@progbits
