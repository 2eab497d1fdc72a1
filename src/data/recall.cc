// placeholder
#include "data/recall.h"
