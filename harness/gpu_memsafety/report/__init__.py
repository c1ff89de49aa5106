"""Run reports: the documents that CI systems and people read after a run.

One run gives one `report.json` (schema `gpu-memsafety-report/1`: docs/report-schema.md, and as JSON Schema
docs/report.schema.json) and renderings of it: a terminal summary, JUnit XML for CI test tabs, Markdown for
GitHub job summaries. One module per job:

    document   build the document from CaseResults: summary, matrix, run id, interruption, shard
    load       read a file safely and validate it (structure, fields, summary and matrix recomputed)
    findings   one finding as text
    render     what every renderer shows (headline, groups), escaping, the Renderer base class
    terminal, junit, markdown   one renderer per format
    write      the report directory: checked before the run, the set written atomically

The names below are the package's public interface; import them from `gpu_memsafety.report`.
"""
from gpu_memsafety.report.document import (
    EMPTY,
    FAILED,
    FAILURE,
    INTERRUPTED,
    KNOWN_BUG,
    NOT_APPLICABLE,
    NOT_RUN_LABELS,
    OK,
    PASSED,
    REPORT_SCHEMA,
    STATUSES,
    UNSUPPORTED,
    VERDICTS,
    KindTotals,
    MatrixRow,
    build_report,
    case_from_json,
    case_json,
    cases_from_report,
    finding_from_json,
    kind_totals,
    matrix,
    new_run_id,
    join_reasons,
    outcome_ran,
    row_reason,
    row_verdict,
    run_mode,
    runner_arch,
    shard_record,
    summarize,
    unchecked_reasons,
    upstream_of,
    worst_verdict,
)
from gpu_memsafety.report.annotations import emit_github, github_annotations
from gpu_memsafety.report.baselines import accepted_text, is_accepted, stale_entries
from gpu_memsafety.report.codequality import CodeQualityRenderer, render_codequality
from gpu_memsafety.report.findings import case_findings, describe_finding, finding_fields, finding_signature, key_values
from gpu_memsafety.report.html import HtmlRenderer, render_html
from gpu_memsafety.report.junit import JUnitRenderer, render_junit
from gpu_memsafety.report.load import (
    MAX_JSON_DEPTH,
    MAX_REPORT_BYTES,
    FieldChecker,
    ReportError,
    load_report,
    read_json_file,
    validate_report,
)
from gpu_memsafety.report.markdown import (
    MarkdownRenderer,
    md_code_block,
    md_details,
    md_table,
    md_text,
    md_upstream,
    render_markdown,
    verdict_badge,
)
from gpu_memsafety.report.render import (
    Headline,
    Renderer,
    env_text,
    environment_pairs,
    gpus_text,
    headline,
    plural,
    sanitizer_searched,
    sanitizer_text,
    visible,
)
from gpu_memsafety.report.picture import Picture, buffer_records, picture, strip
from gpu_memsafety.report.sarif import SarifRenderer, render_sarif
from gpu_memsafety.report.terminal import TerminalRenderer, render_terminal
from gpu_memsafety.report.write import (
    MIN_FREE_BYTES,
    REPORT_FILES,
    ReportDirError,
    check_report_dir,
    render_files,
    report_json_text,
    start_report_dir,
    write_reports,
)
