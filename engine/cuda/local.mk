# engine/cuda/: CUDA backend (cuDNN, cuBLASLt, NCCL), built when configure finds CUDA.
if HAVE_CUDA
endif
