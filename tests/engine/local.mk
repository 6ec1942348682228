# tests/engine
