"""The detectors, one module each behind one interface (base.Detector; registry.UNITS lists them): guard markers,
memcheck, guard page (pageprobe plans its reruns), poison, uninit (fillcheck is its worker side), racecheck and
synccheck (hazards)."""
