// Everything an embedding program needs.
#pragma once

#include "sluice/clock.h"
#include "sluice/decision.h"
#include "sluice/limit.h"
#include "sluice/limiter.h"
#include "sluice/memory_store.h"
#include "sluice/result.h"
#include "sluice/store.h"
#include "sluice/version.h"
