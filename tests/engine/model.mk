# tests/engine/model.mk
