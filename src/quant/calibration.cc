// placeholder
#include "quant/calibration.h"
