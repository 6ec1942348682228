# tests/data/local.mk
