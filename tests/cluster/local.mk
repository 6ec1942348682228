# tests/cluster/local.mk
