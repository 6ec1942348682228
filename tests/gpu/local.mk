# tests/gpu/local.mk
