// Umbrella header: everything a kernel author needs.
#pragma once

#include "tessera/Cache.h"
#include "tessera/Compile.h"
#include "tessera/Export.h"
#include "tessera/Kernel.h"
#include "tessera/dsl/DSL.h"
#include "tessera/dsl/Tiles.h"
#include "tessera/runtime/Collectives.h"
#include "tessera/support/Error.h"
