// placeholder
#include "quant/grid.h"
