# engine/model.mk
