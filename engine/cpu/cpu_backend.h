/* The "cpu" backend: oneDNN primitives over a dl_graph, activations kept in
 * the blocked layouts oneDNN picks, reordered only at the edges. */
#ifndef DLJOB_ENGINE_CPU_CPU_BACKEND_H
#define DLJOB_ENGINE_CPU_CPU_BACKEND_H

#include "engine/backend.h"

extern const struct dl_backend_ops dl_backend_cpu;

#endif
