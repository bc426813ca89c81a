// CPU tiles (generated only)
