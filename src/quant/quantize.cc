// placeholder
#include "quant/quantize.h"
