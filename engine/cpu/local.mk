# engine/cpu/local.mk
