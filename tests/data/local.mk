# tests/data
