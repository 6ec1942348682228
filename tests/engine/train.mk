# tests/engine/train.mk
