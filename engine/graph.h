/* Device-neutral description of a network: nodes over numbered values, with
 * parameters stored in torchvision's names, shapes and layouts (OIHW for conv
 * weights), owned here in plain float32.  Backends compile a graph into their
 * own primitives and layouts; the optimizer, allreduce and checkpoints only
 * ever see the plain arrays in dl_graph.params. */
#ifndef DLJOB_ENGINE_GRAPH_H
#define DLJOB_ENGINE_GRAPH_H

#include <stddef.h>
#include <stdint.h>

enum dl_node_kind {
	DL_NODE_CONV,    /* in[0] (N,Ci,H,W) -> out (N,Co,Ho,Wo); weight (Co,Ci,k,k); no bias */
	DL_NODE_BN,      /* batch norm over C; gamma/beta params, running mean/var buffers */
	DL_NODE_RELU,    /* out = max(in[0], 0) */
	DL_NODE_ADD,     /* out = in[0] + in[1] (residual) */
	DL_NODE_MAXPOOL, /* kernel/stride/pad, torchvision: 3/2/1 */
	DL_NODE_GAP,     /* global average pool: (N,C,H,W) -> (N,C,1,1) */
	DL_NODE_FC,      /* (N,C,1,1) -> (N,K,1,1); weight (K,C), bias (K) */
};

struct dl_shape {
	int c, h, w; /* per sample; the batch size is chosen when a backend prepares */
};

struct dl_node {
	enum dl_node_kind kind;
	int in[2];     /* value ids; in[1] only for DL_NODE_ADD, else -1 */
	int out;       /* value id this node produces (each value produced once) */
	int relu;      /* BN, ADD: apply ReLU to the result (fused where the backend can) */
	int kernel, stride, pad; /* CONV, MAXPOOL */
	int param[2];  /* CONV: weight,-1; BN: gamma,beta; FC: weight,bias (indices in params) */
	int buffer[2]; /* BN: running_mean, running_var (indices in buffers) */
};

struct dl_tensor_f32 {
	char name[96];   /* torchvision state_dict name, e.g. "layer1.0.conv1.weight" */
	int ndim;
	int dims[4];
	size_t count;    /* product of dims */
	float *data;
	float *grad;     /* params only: d(loss)/d(data), written by backward; NULL for buffers */
	int no_decay;    /* params only: BN gamma/beta and biases skip weight decay by default */
};

struct dl_graph {
	char model[32];              /* "resnet50", "resnet20", ... */
	int n_nodes;
	struct dl_node *nodes;       /* topological order */
	int n_values;
	struct dl_shape *values;     /* value 0 is the input image, last node's out the logits */
	int input;                   /* = 0 */
	int output;                  /* value id of the logits (K,1,1) */
	int num_classes;
	int n_params;
	struct dl_tensor_f32 *params;
	int n_buffers;
	struct dl_tensor_f32 *buffers; /* BN running_mean/running_var */
	int64_t bn_batches_tracked;   /* torchvision's num_batches_tracked, same for every BN */
	float bn_momentum;            /* 0.1 */
	float bn_eps;                 /* 1e-5 */
};

#endif
