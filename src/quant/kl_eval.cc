// placeholder
#include "quant/kl_eval.h"
