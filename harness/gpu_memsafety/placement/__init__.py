"""Where a tensor sits in its allocation: guard layouts, guard-marker arenas, the device-side marker check, guard pages (VMM)."""
