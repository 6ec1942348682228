# engine/ref/local.mk
