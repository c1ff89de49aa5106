"""Turn compute-sanitizer output (the `--xml --save` file, or the text log) into records.

Why this package exists: findings are taken from the sanitizer's own records, never from its
`ERROR SUMMARY` line (which also counts API errors and "Target application returned an error"), and a file
the sanitizer could not finish (killed process, print limit) must say so instead of reading as clean.
So every parse returns the records it could read plus `complete` and, when not complete, a `problem`.

- record.py: the records (SanitizerRecord, HazardAccess, ParseResult), their categories, and `classify`
  (what a record says happened, one word per kind of report the tools document).
- xml_file.py: `parse_xml`, the `--xml --save` file, read incrementally and refusing any DOCTYPE or entity.
- text_log.py: `parse_text`, the text output (memcheck, racecheck's two shapes, synccheck).

Pure: no torch, triton or CUDA. The names below are the package's interface; import them from here.
"""
from gpu_memsafety.sanitizer.parse.record import (API_ERROR, ATOMIC, CATEGORIES, HARDWARE_EXCEPTION, HAZARD,
                                                  INTERNAL_ERROR, LEAK, MALLOC_FREE, MEMORY_ACCESS, MISALIGNED,
                                                  OTHER, PROCESS_EXIT, RACE_HAZARD, READ, RECORD_KINDS, SYNC_ERROR,
                                                  UNINITIALIZED_READ, UNUSED_MEMORY, WRITE, HazardAccess,
                                                  ParseResult, SanitizerRecord, classify, is_misaligned,
                                                  normalize_direction, normalize_space, parse_int, placeability)
from gpu_memsafety.sanitizer.parse.text_log import DEFAULT_PREFIX, parse_text
from gpu_memsafety.sanitizer.parse.xml_file import (CHUNK_BYTES, RECORD_TAG, ROOT_TAG, HostileXMLError,
                                                    parse_xml, record_from_xml)

__all__ = ["API_ERROR", "ATOMIC", "CATEGORIES", "CHUNK_BYTES", "DEFAULT_PREFIX", "HARDWARE_EXCEPTION", "HAZARD",
           "INTERNAL_ERROR", "LEAK", "MALLOC_FREE", "MEMORY_ACCESS", "MISALIGNED", "OTHER", "PROCESS_EXIT",
           "RACE_HAZARD", "READ", "RECORD_KINDS", "RECORD_TAG", "ROOT_TAG", "SYNC_ERROR", "UNINITIALIZED_READ",
           "UNUSED_MEMORY", "WRITE", "HazardAccess", "HostileXMLError", "ParseResult", "SanitizerRecord", "classify",
           "is_misaligned", "normalize_direction", "normalize_space", "parse_int", "parse_text", "parse_xml",
           "placeability", "record_from_xml"]
