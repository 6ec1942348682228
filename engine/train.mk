# engine/train.mk
