# tests/engine/ops.mk
