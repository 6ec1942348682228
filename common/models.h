/* The models dljob trains: the one list of their names, for the engine
 * (engine/resnet.c builds them, dl_model_names), the runtime's --model
 * and the plugin's --dl-job (spank/options.c), which does not link the
 * engine.  Header only.  engine/resnet.c has one architecture row per
 * entry, in this order (a static assert and engine/test/test_model.c
 * check it); tests/test_man_tables.sh checks that both man pages name
 * every model.
 *
 * X(name, plugin): plugin is 1 when srun --dl-job=NAME accepts it (the
 * test network convnet is the runtime's only). */
#ifndef DLJOB_COMMON_MODELS_H
#define DLJOB_COMMON_MODELS_H

#define DL_MODELS(X) \
	X(resnet18, 1) \
	X(resnet34, 1) \
	X(resnet50, 1) \
	X(resnet101, 1) \
	X(resnet152, 1) \
	X(resnet20, 1) \
	X(resnet32, 1) \
	X(resnet56, 1) \
	X(convnet, 0)

/* DL_MODEL_resnet18, ...: a model's index in the list. */
enum dl_model_id {
#define DL_MODEL_ENUM(name, plugin) DL_MODEL_##name,
	DL_MODELS(DL_MODEL_ENUM)
#undef DL_MODEL_ENUM
	DL_MODEL_COUNT
};

struct dl_model_entry {
	const char *name;
	int plugin;
};

static const struct dl_model_entry dl_model_list[DL_MODEL_COUNT] = {
#define DL_MODEL_ROW(name, plugin) { #name, plugin },
	DL_MODELS(DL_MODEL_ROW)
#undef DL_MODEL_ROW
};

/* "resnet18,resnet34,...": every name, comma-separated (after the first
 * byte, which is a comma: &DL_MODEL_NAMES[1]). */
#define DL_MODEL_NAME_COMMA(name, plugin) "," #name
#define DL_MODEL_NAMES DL_MODELS(DL_MODEL_NAME_COMMA)

#endif
