#include "registration.h"
