"""The JSON contract: one shape per kind of object, and which shape each command prints with --json.

SHAPES is the single description: docs/JSON.md's tables are generated from it
(scripts/gen_json_docs.py) and tests/test_json_contract.py runs every command
with --json and checks its output against it with `validate`. The shapes that
several commands share are built by one function each in output.py (fact_json,
hit_json, audit_row_json, state_json): this module is only the description.

Types: string, integer, number, boolean, object (keys vary), list[T],
map[T] (an object whose keys vary and whose values are T), @shape (another
shape), and T|null. A field whose name ends in `?` is present only in the
case its meaning names.
"""

from __future__ import annotations

from typing import Any

Field = tuple[str, str, str]  # (name, type, meaning)

SHAPES: dict[str, tuple[Field, ...]] = {
    # ------------------------------------------------ the kinds of object
    "error": (
        ("error", "string", "What went wrong, one line (the text after `memctl: error: `)."),
        ("hint", "string|null", "What to do about it; null when there is no hint."),
        ("exit_code", "integer", "The process exit code (the same number)."),
    ),
    "fact": (
        ("name", "string", "The fact's name (its file stem when the name is not a valid one)."),
        ("path", "string", "The file, relative to the store."),
        ("type", "string", "user, feedback, project, reference, procedure, ..."),
        ("description", "string", "The one-line description (frontmatter)."),
        ("status", "string", "live, archived (forgotten), superseded, or expired (live, past its `expires`: the next `forget --policies` archives it)."),
        ("importance", "number|null", "metadata.importance as memctl reads it: 0-1 (a number outside is clamped); null when the file does not set it or sets no finite number."),
        ("tags", "list[string]", "metadata.tags."),
        ("metadata", "object", "The frontmatter's metadata mapping as written."),
        ("body", "string|null", "The markdown body; null where bodies are not printed (`list`, `audit --never-shown`)."),
    ),
    "episode": (
        ("id", "string", "ep-YYYYMMDDHHMMSS-xxxx."),
        ("ts", "string", "When, ISO 8601 with offset."),
        ("agent", "string", "Who (may be empty)."),
        ("type", "string", "decision, error, success, feedback, conflict, ..."),
        ("description", "string", "What happened."),
        ("outcome", "string", "How it turned out (may be empty); never joined into description."),
        ("importance", "number", "0-1."),
        ("tags", "list[string]", "Tags."),
        ("refs", "list[string]", "Fact names, episode ids, commits it refers to."),
        ("line", "integer", "Its line in ledgers/episodes.tsv, the same in `episode add`, `episode import` and `episode list` (0: not written, `--dry-run`)."),
    ),
    "ledger_row": (),  # generated as a map: see _MAPS
    "hit_path": (
        ("path", "string", "Where a hit is: a fact's file, `ledgers/episodes.tsv:LINE`, a document's `PATH:START-END`; each once, best first."),
    ),
    "hit": (
        ("rank", "integer", "1 for the best hit."),
        ("kind", "string", "fact, episode or chunk (lines of a document in a declared source, docs/SOURCES.md)."),
        ("name", "string", "The fact's name, the episode's id, or the chunk's PATH:START-END."),
        ("id", "string|null", "The episode's id; null for a fact or a chunk."),
        ("path", "string", "The fact file, ledgers/episodes.tsv:LINE, or the chunk's PATH:START-END (`memctl show` prints those lines)."),
        ("type", "string", "The fact's or episode's type; a chunk's source name."),
        ("description", "string", "The description (an episode's without its outcome); a chunk's first words."),
        ("outcome", "string|null", "An episode's outcome (may be empty); null for a fact or a chunk."),
        ("score", "number", "The ranking score."),
        ("relevance", "number", "Absolute relevance to the query, 0-1."),
        ("status", "string", "live, archived, superseded or expired."),
        ("factors?", "map[number]", "Only with --explain: relevance, importance, confidence, recency, frequency."),
        ("signals?", "map[number|null]", "Only with --explain: bm25, keyword, cosine, vector, window (null when not computed)."),
        ("file?", "string", "Only for a chunk: the document, store-relative inside the store, else absolute."),
        ("start?", "integer", "Only for a chunk: its first line (from 1)."),
        ("end?", "integer", "Only for a chunk: its last line (inclusive)."),
        ("heading?", "list[string]", "Only for a chunk: the headings above it, outermost first (code: its definition)."),
        ("source?", "string", "Only for a chunk: the source's name."),
        ("source_description?", "string", "Only for a chunk: the source's one-line description."),
    ),
    "source": (
        ("name", "string", "The source's name ([sources.NAME] in memctl.toml)."),
        ("kind", "string", "markdown, text or code."),
        ("description", "string", "Its one-line description."),
        ("paths", "list[string]", "Its globs."),
    ),
    "source_removed": (
        ("removed", "string", "The source removed from memctl.toml (its files are untouched)."),
    ),
    "source_index": (
        ("source", "string", "The source."),
        ("files", "integer", "Files indexed."),
        ("chunks", "integer", "Their chunks."),
        ("changed", "integer", "Files read and chunked by this run (new or edited)."),
        ("removed", "integer", "Files whose chunks this run removed (deleted, no longer matched, or now skipped)."),
        ("skipped", "list[@skipped_file]", "Files left out, and why."),
    ),
    "skipped_file": (
        ("path", "string", "The file or folder (or a count of files past the cap)."),
        ("reason", "string", "Why: binary, not UTF-8, over the size cap, symbolic link, deleted during indexing, ..."),
    ),
    "source_status": (
        ("source", "string", "The source."),
        ("description", "string", "Its description."),
        ("kind", "string", "markdown, text or code."),
        ("paths", "list[string]", "Its globs."),
        ("exclude", "list[string]", "Globs left out."),
        ("chunk_size", "integer", "Characters per chunk."),
        ("overlap", "integer", "Characters carried into the next chunk."),
        ("prompt", "boolean", "Whether the per-prompt hook may show its chunks."),
        ("files", "integer", "Files in the index."),
        ("chunks", "integer", "Chunks in the index."),
        ("indexed", "boolean", "Whether an index run has covered it."),
        ("stale", "integer", "Files new, edited or deleted since the last run (by size and mtime)."),
        ("skipped", "list[@skipped_file]", "What the last run left out, and why."),
    ),
    "document_lines": (
        ("path", "string", "The document, store-relative inside the store, else absolute."),
        ("start", "integer", "First line printed (from 1)."),
        ("end", "integer", "Last line printed (inclusive; the file's last line when it is shorter)."),
        ("source", "string", "The declared source that holds it."),
        ("source_description", "string", "That source's description."),
        ("text", "string", "The lines, each ending in a newline."),
    ),
    "audit_row": (
        ("line", "integer", "Its line in ledgers/access.tsv (for a row still pending in .memctl/access/, the line it gets there)."),
        ("ts", "string", "When."),
        ("agent", "string", "Who."),
        ("command", "string", "recall, context, show, used, mcp-recall, ..."),
        ("query", "string", "The query (empty for show and used)."),
        ("shown", "list[string]", "The fact names and episode ids shown or used."),
    ),
    "near_dup_match": (
        ("score", "number", "Cosine similarity."),
        ("overlap", "number", "Lexical overlap (Jaccard of words / kana-kanji bigrams), 0-1."),
        ("id", "string", "The row: a ledger line number, or a fact's file stem (what `show` takes; in a Claude Code directory the name is a title)."),
        ("text", "string", "The matched text."),
        ("where", "string", "file:line of the match."),
        ("judge", "string|null", "What --judge-cmd answered for this pair: same, different, failed (the score decides); null: not asked."),
        ("verdict?", "string", "Only with --explain: this hit's verdict (the judge's answer, else its score's band)."),
    ),
    "job": (
        ("job", "string", "The job's name ([jobs.NAME])."),
        ("schedule", "string", "Cron-style schedule."),
        ("max_age", "string", "How old its last success may get."),
        ("last_run", "string|null", "When it last ran; null if never."),
        ("last_exit", "integer|null", "Its last run's exit code; null if never run, or if that run has not ended (running, or run-job was killed)."),
        ("last_success", "string|null", "When it last succeeded; null if never."),
        ("state", "string", "ok, failing, stale, never run, running, waiting (for another job of the store to end: its "
                            "`running` is true too), refused (its last run was refused: nothing ran)."),
        ("running", "boolean", "A run holds its lock now."),
        ("log", "string", "Its log file, relative to the store."),
        ("log_tail", "list[string]", "The log's last lines."),
        ("last_refused", "string|null", "When run-job last refused to start it (its table waits for approval: memctl trust), if it has not run since; else null."),
        ("refused", "string|null", "Why, when its last run was refused (state refused); else null."),
    ),
    "state": (
        ("path", "string", "STATE.md, relative to the store."),
        ("updated", "string|null", "Frontmatter `updated`."),
        ("generator", "string|null", "Frontmatter `generator`."),
        ("numbers", "map[number]", "The key numbers (dotted names)."),
        ("body", "string", "The markdown after the frontmatter."),
    ),
    "state_version": (
        ("commit", "string", "The commit of this version of STATE.md."),
        ("subject", "string", "Its subject."),
        ("updated", "string|null", "Frontmatter `updated` of that version."),
        ("numbers", "map[number]", "Its key numbers."),
    ),
    "problem": (
        ("path", "string", "The file, relative to the store."),
        ("line", "integer", "The line (0: the whole file)."),
        ("code", "string", "A stable identifier of the kind of problem."),
        ("message", "string", "What is wrong."),
        ("severity", "string", "error or warning."),
    ),
    "drift": (
        ("kind", "string", "missing, orphan, duplicate, too-long, too-big."),
        ("target", "string", "The fact file the line points at."),
        ("line", "integer", "The line in the index (0: none)."),
        ("message", "string", "What is wrong."),
        ("file", "string", "The index file: empty for MEMORY.md, else the topic file."),
    ),
    "similar_fact": (
        ("path", "string", "The similar fact's file."),
        ("score", "number", "How similar."),
        ("shared", "integer", "Keywords both share."),
        ("exact", "boolean", "The same description after normalisation."),
        ("method", "string", "keywords, or the embedder that found it (e5-small-q4, ...)."),
        ("near", "boolean", "False for an embedder's similar band (below its near-duplicate threshold): never refused by strict."),
    ),
    "value_count": (
        ("value", "string", "A value (unescaped)."),
        ("count", "integer", "How many records hold it."),
    ),
    # ------------------------------------------------ parts of envelopes
    "import_file": (
        ("path", "string", "The transcript (as given)."),
        ("records", "integer", "Records read."),
        ("imported", "integer", "New episodes from it."),
        ("already", "integer", "Records imported before."),
        ("bad", "integer", "Records that could not be read."),
        ("left_out", "integer", "Records of no episode kind."),
        ("torn", "boolean", "The file ends in a partial line (read up to it)."),
        ("resumed_at", "integer", "The line reading resumed at (0: from the start)."),
        ("problem", "string", "Why the file was skipped (empty: it was not)."),
        ("first_bad", "string", "Where the first bad record is (empty: none)."),
    ),
    "calibration_point": (
        ("threshold", "number", "A threshold."),
        ("precision", "number", "Precision at it."),
        ("recall", "number", "Recall at it."),
        ("f1", "number", "F1 at it."),
        ("tp", "integer", "True positives."),
        ("fp", "integer", "False positives."),
        ("fn", "integer", "False negatives."),
        ("tn", "integer", "True negatives."),
    ),
    "embedder_status": (
        ("backend", "string", "The backend that would embed."),
        ("model", "string", "Its model."),
        ("label", "string", "backend (model), as other commands name it."),
        ("configured", "string", "[embedding] backend in memctl.toml."),
        ("available", "boolean", "It can run here."),
        ("notes", "list[string]", "Why not, what to install."),
    ),
    "cache_entry": (
        ("source", "string", "What the vectors are of (recall-facts, ledger:NAME:COL, ...)."),
        ("backend", "string", "The backend that made them (? when unreadable)."),
        ("model", "string", "The model."),
        ("kind", "string", "query or passage."),
        ("dim", "integer", "Dimensions (0 when unreadable)."),
        ("rows", "integer", "Vectors."),
        ("embedded_last", "integer", "Rows embedded by the last update."),
        ("embedded_total", "integer", "Rows embedded since the cache was made."),
        ("updated", "string", "When it was last updated (empty when unknown)."),
        ("bytes", "integer", "Size on disk."),
        ("folder", "string", "The folder, relative to the store."),
        ("problem", "string|null", "Why it is unusable (then it is rebuilt); null when fine."),
    ),
    "state_file": (
        ("path", "string", "STATE.md, relative to the store."),
        ("updated", "string", "When it was updated (from `source`)."),
        ("source", "string", "updated (frontmatter), commit or mtime."),
        ("age", "string", "Its age, e.g. 3h."),
        ("age_seconds", "integer", "Its age in seconds."),
        ("max_age", "string", "The age at which it is stale."),
        ("stale", "boolean", "Older than max_age, or dated in the future (`ahead`)."),
        ("ahead", "boolean", "Dated more than 5 minutes in the future by every date it has (a clock that was wrong): its age is unknown (age 0)."),
    ),
    "conflict_copy": (
        ("kind", "string", "merge."),
        ("name", "string", "The fact."),
        ("path", "string", "The fact in place."),
        ("copy", "string", "The other version, memory/conflicts/NAME.HASH.md (conflicts/ in a Claude Code directory)."),
        ("hunk", "list[string]", "The lines that differ: - in place, + in the copy."),
    ),
    "resolution": (
        ("path", "string", "The file merged."),
        ("kind", "string", "index, state, ledger, fact, archive."),
        ("how", "string", "What was done, in words."),
    ),
    "agent_file_change": (
        ("path", "string", "The settings or MCP file (absolute)."),
        ("action", "string", "create, update or remove."),
        ("changes", "list[string]", "What changes, in words."),
        ("content", "object|string|null", "The file's JSON after the change (a TOML file: its text); null when it is removed."),
    ),
    # ------------------------------------------------ per-command envelopes
    "init": (
        ("root", "string", "The store's directory, an absolute path."),
        ("created", "list[string]", "What was created."),
    ),
    "fact_change": (
        ("action", "string", "created, updated, forgotten, restored, or unchanged (the same write again, a pin of a pinned fact)."),
        ("name", "string", "The fact."),
        ("path", "string", "Its file now."),
        ("commit", "string|null", "The commit; null with --no-commit."),
        ("similar?", "list[@similar_fact]", "`remember` only: similar facts found."),
        ("superseded?", "list[string]", "`remember` only: files archived by --supersedes."),
        ("pinned?", "boolean", "`pin` / `unpin` only: pinned now."),
        ("from?", "string", "`restore` only: where the fact was."),
    ),
    "log_entry": (
        ("commit", "string", "The commit."),
        ("date", "string", "Its date."),
        ("message", "string", "Its subject."),
        ("added", "integer", "Lines added to the file (by a move, forget or restore: against the file it moved from)."),
        ("removed", "integer", "Lines removed (the same way)."),
        ("path", "string", "The file at that commit."),
    ),
    "ledger": (
        ("name", "string", "The ledger's name."),
        ("path", "string", "Its file."),
        ("rows", "integer", "Records."),
        ("columns", "list[string]", "Column names."),
        ("unique", "string|null", "The unique column; null for none."),
        ("declared", "boolean", "Declared in memctl.toml."),
    ),
    "ledger_created": (
        ("ledger", "string", "The ledger's name."),
        ("path", "string", "Its file."),
        ("columns", "list[string]", "Column names."),
        ("unique", "string|null", "The unique column; null for none."),
        ("header?", "boolean", "`adopt` only: the file has a header line."),
        ("rows?", "integer", "`adopt` only: records in the file."),
        ("duplicates?", "integer", "`adopt` only: values of the unique column that already repeat."),
        ("commit?", "string|null", "`adopt` only: the commit."),
    ),
    "ledger_write": (
        ("ledger", "string", "The ledger's name."),
        ("path", "string", "Its file."),
        ("appended", "integer", "Records appended (or committed by `ledger commit`)."),
        ("commit", "string|null", "The commit; null with --no-commit or nothing to commit."),
    ),
    "check": (
        ("ok", "boolean", "No errors (warnings allowed)."),
        ("problems", "list[@problem]", "What was found."),
    ),
    "index_check": (
        ("ok", "boolean", "MEMORY.md matches the facts."),
        ("drift", "list[@drift]", "What differs."),
    ),
    "index_write": (
        ("changed", "boolean", "MEMORY.md was rewritten."),
        ("commit", "string|null", "The commit; null when unchanged or --no-commit."),
    ),
    "verification": (
        ("ledger", "string", "The ledger."),
        ("path", "string", "Its file."),
        ("commits", "integer", "Commits checked."),
        ("ok", "boolean", "Only ever appended to."),
        ("commit", "string|null", "The first commit that rewrote history; null when ok."),
        ("subject", "string|null", "Its subject."),
        ("line", "integer|null", "The first line changed or lost."),
        ("message", "string", "The verdict in words."),
    ),
    "episode_import": (
        ("imported", "integer", "Episodes appended."),
        ("redacted", "map[integer]", "Secrets redacted, by kind; `private`: `<private>` spans hidden."),
        ("bad_records", "integer", "Records that could not be read."),
        ("dry_run", "boolean", "Nothing was written."),
        ("commit", "string|null", "The commit."),
        ("files", "list[@import_file]", "Per transcript."),
        ("episodes", "list[@episode]", "The episodes appended (or that would be)."),
    ),
    "query_hits": (
        ("query", "string", "One line of --queries."),
        ("hits", "list[@hit]", "Its hits."),
    ),
    "context": (
        ("budget", "integer", "The token budget."),
        ("tokens", "integer", "Tokens used (estimated)."),
        ("sections", "map[integer]", "Parts per section."),
        ("dropped", "integer", "Parts left out for the budget."),
        ("shown", "list[string]", "Fact names, episode ids and chunks (PATH:START-END) in the bundle."),
        ("text", "string", "The bundle."),
    ),
    "used": (
        ("used", "list[string]", "The keys recorded as used."),
    ),
    "near_dup_check": (
        ("text", "string", "The text checked."),
        ("verdict", "string", "near-duplicate, similar (the band below the threshold) or new."),
        ("best", "number", "The best score."),
        ("threshold", "number", "The near-duplicate threshold applied."),
        ("similar", "number|null", "The similar band's lower edge (null: this model has no band)."),
        ("hits", "list[@near_dup_match]", "The top matches."),
        ("embedder", "string", "The embedder."),
        ("source?", "string", "Without --stdin: what was compared with."),
        ("backend?", "string", "Without --stdin: the embedding backend."),
        ("model?", "string", "Without --stdin: the model."),
        ("threshold_origin?", "string", "Without --stdin: where the threshold came from."),
        ("judge_cmd?", "string|null", "Without --stdin: the judge command asked (--judge-cmd, [neardup] judge_cmd), or null."),
        ("rows?", "integer", "Without --stdin: rows compared with."),
        ("embedded?", "integer", "Without --stdin: rows embedded by this call."),
        ("via?", "string", "Without --stdin: in-process or embed-server."),
        ("notes?", "list[string]", "Without --stdin: notes."),
    ),
    "near_dup_scan": (
        ("source", "string", "What was scanned."),
        ("embedder", "string", "The embedder."),
        ("threshold", "number", "The threshold."),
        ("threshold_origin", "string", "Where it came from."),
        ("rows", "integer", "Rows scanned."),
        ("embedded", "integer", "Rows embedded by this call."),
        ("notes", "list[string]", "Notes."),
        ("pairs", "list[@scan_pair]", "Pairs at or above the threshold, best first."),
    ),
    "scan_pair": (
        ("score", "number", "Cosine similarity of the two texts."),
        ("overlap", "number", "Lexical overlap of the two texts, 0-1."),
        ("a", "@scan_row", "One side."),
        ("b", "@scan_row", "The other side."),
    ),
    "scan_row": (
        ("id", "string", "A fact's name, or a ledger row's key (its line number when the ledger has no key)."),
        ("text", "string", "The text compared."),
        ("where", "string", "Its file, and for a ledger row its line (ledgers/x.tsv:LINE)."),
    ),
    "calibration": (
        ("embedder", "string", "The embedder."),
        ("backend", "string", "Backend."),
        ("model", "string", "Model."),
        ("pairs", "integer", "Labelled pairs."),
        ("positives", "integer", "Pairs labelled duplicate."),
        ("min_precision", "number", "The precision the recommendation needs."),
        ("target_met", "boolean", "A threshold reached it."),
        ("recommended", "@calibration_point|null", "The best F1 among thresholds reaching min_precision; when none does (target_met false), the best F1 overall, which --save refuses; null when no pair scores as a duplicate."),
        ("notes", "list[string]", "Notes."),
        ("points", "list[@calibration_point]", "Every threshold tried."),
        ("saved", "string|null", "What --save wrote; null without it."),
    ),
    "cache_status": (
        ("embedder", "@embedder_status", "The configured embedder."),
        ("caches", "list[@cache_entry]", "Every source's cache."),
        ("pending", "integer", "Texts embedded by a run that was stopped (Ctrl-C, SIGTERM) or is still running, "
                               "not yet in a source's cache: the next sync uses them."),
    ),
    "cache_rebuilt": (
        ("source", "string", "The cache's source."),
        ("rows", "integer", "Rows the cache holds (each text embedded once, whichever source needed it first)."),
        ("embedder", "string", "The embedder."),
    ),
    "cache_cleared": (
        ("removed", "list[string]", "What was removed: folders (all), or a source's files in each folder."),
    ),
    "embed_server": (
        ("stopped?", "boolean", "--stop: a server was stopped."),
        ("server?", "object|null", "--stop: the server that was stopped (the fields below); null if none."),
        ("ready?", "boolean", "Serving: printed once the model is loaded."),
        ("pid?", "integer", "Serving: the server's process id."),
        ("backend?", "string", "Serving: the embedding backend."),
        ("model?", "string", "Serving: the model."),
        ("fingerprint?", "string", "Serving: the embedder's fingerprint (cache key)."),
        ("label?", "string", "Serving: the embedder's label."),
        ("notes?", "list[string]", "Serving: notes."),
        ("socket?", "string", "Serving: the socket, relative to the store."),
        ("watch?", "boolean", "Serving: the fact folders are watched (inotify), so commands skip their stat of every fact file."),
    ),
    "state_update": (
        ("path", "string", "STATE.md, relative to the store."),
        ("updated", "string|null", "Frontmatter `updated`."),
        ("generator", "string|null", "Frontmatter `generator`."),
        ("numbers", "map[number]", "The key numbers."),
        ("body", "string", "The markdown after the frontmatter."),
        ("message", "string", "The commit message."),
        ("commit", "string|null", "The commit; null with --no-commit."),
    ),
    "state_check": (
        ("ok", "boolean", "Nothing is stale."),
        ("files", "list[@state_file]", "Every STATE.md."),
    ),
    "schedule_render": (
        ("written", "list[string]", "Plists written."),
        ("removed", "list[string]", "Plists removed."),
        ("unchanged", "list[string]", "Plists already current."),
        ("crontab", "string", "The crontab block."),
        ("warnings", "list[string]", "What the jobs will lack (no git on their PATH)."),
    ),
    "schedule_plan": (
        ("scheduler", "string", "cron or launchd."),
        ("changed", "boolean", "Something changes (or would)."),
        ("dry_run", "boolean", "Nothing was changed."),
        ("steps", "list[string]", "What is (or would be) run."),
        ("crontab", "string", "The crontab after the change."),
        ("notes", "list[string]", "What a dry run could not read (no crontab or launchctl here)."),
        ("warnings", "list[string]", "What the jobs will lack (no git on their PATH)."),
        ("approved", "list[string]", "The job settings (jobs.NAME, jobs.NAME:script) this install approved; none for a dry run or uninstall."),
        ("waiting_digest", "string|null", "With install --dry-run: the SHA-256 of the job settings the install would approve, for `memctl schedule install --expect DIGEST`; null when nothing waits, and without --dry-run."),
    ),
    "trust": (
        ("settings", "list[@trust_setting]", "Every executable setting of memctl.toml, or those the KEYs name (docs/JOBS.md, \"Consent\")."),
        ("approved", "list[string]", "The keys this command approved (none with --list)."),
        ("waiting_digest", "string|null", "With --list: the SHA-256 of what waits (of the KEYs given, if any), "
                                          "for `memctl trust --expect DIGEST`; null when nothing waits, and without --list."),
    ),
    "trust_setting": (
        ("key", "string", "jobs.NAME, jobs.NAME:script (the contents of a job's script in the store), "
                          "import.redact_patterns:PATTERN, embedding, neardup.judge_cmd, git.commit or sources.NAME."),
        ("value", "string", "What memctl.toml says now, as canonical JSON (a script's: \"sha256:...\" of its contents); "
                            "(removed) for a redaction pattern another clone took out, still applied while it waits."),
        ("state", "string", "approved, or waiting (memctl does not act on it)."),
        ("was", "string|null", "What this machine approved before; null when nothing was."),
        ("why", "string|null", "Why it waits (how it came in); null when approved."),
    ),
    "procedure": (
        ("name", "string", "The procedure fact."),
        ("description", "string", "Its description."),
        ("trigger", "string", "When to use it."),
        ("version", "integer", "Its version."),
        ("match", "number", "How well it matches the task (best): the share of its trigger's keywords found in the task; for a procedure without a trigger that recall finds, at least recall's relevance. 1 in `procedure list`."),
        ("runs", "integer", "Runs recorded."),
        ("successes", "integer", "Successful runs."),
        ("scored", "integer", "Runs with a score."),
        ("success_rate", "number|null", "EMA (α 0.1, in ledger order) of the results, success 1 and failure 0; null before the first run."),
        ("quality", "number|null", "EMA (α 0.1) of the scores, 0-10; null before the first scored run."),
        ("rank", "number", "success_rate × 0.6 + quality / 10 × 0.4 (a null counts 0)."),
        ("path", "string", "Its file."),
    ),
    "procedure_recorded": (
        ("name", "string", "The procedure."),
        ("recorded", "@ledger_row", "The row appended to ledgers/procedure-outcomes.tsv."),
        ("runs", "integer", "Runs recorded."),
        ("successes", "integer", "Successful runs."),
        ("scored", "integer", "Runs with a score."),
        ("success_rate", "number|null", "EMA (α 0.1, in ledger order) of the results, success 1 and failure 0; null before the first run."),
        ("quality", "number|null", "EMA (α 0.1) of the scores, 0-10; null before the first scored run."),
        ("rank", "number", "success_rate × 0.6 + quality / 10 × 0.4 (a null counts 0)."),
        ("commit", "string|null", "The commit."),
    ),
    "procedure_evolved": (
        ("action", "string", "updated."),
        ("name", "string", "The procedure."),
        ("version", "integer", "Its new version."),
        ("path", "string", "Its file."),
        ("commit", "string|null", "The commit."),
    ),
    "conflicts": (
        ("merge", "list[@conflict_copy]", "Versions a merge kept aside (docs/SYNC.md)."),
        ("total", "integer", "Conflicting pairs found."),
        ("groups", "integer", "Facts involved."),
        ("shown", "integer", "Pairs shown (--limit)."),
        ("conflicts", "list[@judged_pair]", "Pairs that state the same thing with a detail changed, strongest first."),
    ),
    "judged_pair": (
        ("a", "string", "One fact's name."),
        ("b", "string", "The other fact's name."),
        ("score", "number", "Cosine similarity of their descriptions."),
        ("overlap", "number", "Lexical overlap of their descriptions, 0-1."),
        ("verdict", "string", "merge (the same statement), conflict (one detail differs) or none."),
        ("differs", "list[string]", "The details that differ, e.g. \"weekday friday / thursday\", \"negation not / -\"."),
        ("description_a", "string", "a's description."),
        ("description_b", "string", "b's description."),
        ("fact?", "string", "`conflicts`: the fact the pair is grouped under."),
        ("strength?", "number", "`conflicts`: the mean of score and overlap, which orders the pairs."),
    ),
    "consolidation": (
        ("embedder", "string", "The embedder."),
        ("threshold", "number", "Merge threshold."),
        ("threshold_origin", "string", "Where it came from."),
        ("topic_threshold", "number", "Same-topic threshold."),
        ("merge_overlap", "number", "Lexical overlap a merge needs."),
        ("conflict_overlap", "number", "Lexical overlap a conflict needs."),
        ("facts", "integer", "Live facts considered."),
        ("merges", "list[@merge_plan]", "Groups of facts that say the same thing, each merged into one."),
        ("conflicts", "list[@judged_pair]", "Pairs with a detail changed: never merged, listed for a person."),
        ("notes", "list[string]", "Notes."),
        ("applied", "boolean", "The merges were made."),
        ("commit", "string|null", "The commit."),
        ("archived", "list[string]", "Files archived."),
    ),
    "merge_plan": (
        ("survivor", "string", "The fact that stays, updated."),
        ("description", "string", "Its description after the merge."),
        ("absorbed", "list[@absorbed_fact]", "The facts it supersedes (archived, `supersedes` in the survivor)."),
        ("pairs", "list[@judged_pair]", "The judged pairs that joined the group."),
        ("tags", "list[string]", "The survivor's tags after the merge (the union)."),
        ("source", "string|null", "The survivor's source after the merge."),
    ),
    "absorbed_fact": (
        ("name", "string", "The fact's name."),
        ("description", "string", "Its description."),
    ),
    "distillation": (
        ("considered", "integer", "Episodes considered."),
        ("embedder", "string", "The embedder (empty when none was needed)."),
        ("similarity", "number", "Cluster similarity."),
        ("min_cluster", "integer", "Smallest cluster."),
        ("notes", "list[string]", "Notes."),
        ("clusters", "list[@distill_cluster]", "Clusters of episodes and the fact each would become."),
        ("outcomes?", "list[@distill_outcome]", "With --llm-cmd: what became of each cluster."),
        ("commit?", "string|null", "With --llm-cmd: the commit (null with --dry-run)."),
    ),
    "distill_cluster": (
        ("fact", "string", "The name the lesson gets."),
        ("episodes", "list[@distill_episode]", "The episodes it is distilled from, oldest first."),
        ("prompt", "string", "The prompt the command is given on stdin."),
    ),
    "distill_episode": (
        ("id", "string", "Episode id."),
        ("ts", "string", "When it happened."),
        ("type", "string", "Episode type."),
        ("description", "string", "What happened."),
        ("outcome", "string", "How it turned out (\"\" when not recorded)."),
    ),
    "distill_outcome": (
        ("status", "string", "created, planned (--dry-run) or rejected."),
        ("fact", "string|null", "The lesson's name; null when rejected."),
        ("episodes", "list[string]", "The cluster's episode ids."),
        ("reason", "string|null", "Why it was rejected; null otherwise."),
        ("answer", "@distill_answer|null", "The command's answer, validated; null when it was not valid."),
    ),
    "distill_answer": (
        ("summary", "string", "The lesson, one line."),
        ("category", "string", "decision_pattern, error_pattern, optimization or preference."),
        ("confidence", "number", "The command's confidence, 0-1."),
    ),
    "policy_run": (
        ("dry_run", "boolean", "Nothing was changed."),
        ("applied", "boolean", "Changes were made."),
        ("commit", "string|null", "The commit."),
        ("summary", "string", "In words."),
        ("steps", "list[@policy_step]", "What each policy does (or, with --dry-run, would do)."),
        ("kept", "list[@policy_kept]", "What a policy would take but a never-forget class keeps."),
        ("notes", "list[string]", "Notes."),
    ),
    "policy_step": (
        ("kind", "string", "fact or episode."),
        ("name", "string", "The fact's name, or the episode id."),
        ("key", "string", "The fact file's stem, or the episode id."),
        ("action", "string", "archive, compress or tombstone."),
        ("policy", "string", "The policy, or max_facts / max_episodes (capacity)."),
        ("matched", "object", "The fields the condition read, with their values (and retention for capacity)."),
    ),
    "policy_kept": (
        ("kind", "string", "fact or episode."),
        ("name", "string", "The fact's name, or the episode id."),
        ("key", "string", "The fact file's stem, or the episode id."),
        ("would", "string", "What the policy would have done: archive, compress or tombstone."),
        ("policy", "string", "The policy."),
        ("never_forget", "string", "The never-forget class that keeps it."),
        ("matched", "object", "The fields the condition read, with their values."),
    ),
    "maintenance": (
        ("index", "@index_write", "The index regenerated."),
        ("access", "object|null", "The access log: appended, commit; null when it was not committed."),
        ("packed", "integer", "Bytes of loose git objects packed (over 64 MiB of them); 0 when left alone."),
        ("ok", "boolean", "doctor found no errors."),
        ("problems", "list[@problem]", "doctor's findings."),
    ),
    "agent_status": (
        ("scope", "string", "project, local or user."),
        ("settings", "string", "The settings file (the hooks' file)."),
        ("mcp_file", "string", "The MCP configuration file."),
        ("hooks", "map[list[string]]", "memctl's hook commands installed, by event."),
        ("mcp", "string|null", "memctl's MCP server entry as a command line; null if absent."),
        ("entries", "list[@agent_entry]", "Each installed hook and MCP server entry, run once."),
        ("problems", "list[string]", "What is wrong with the files."),
    ),
    "agent_entry": (
        ("item", "string", "`<event> hook` or `MCP server`."),
        ("command", "string", "The command line installed."),
        ("answers", "boolean", "It ran, reached a store and answered (a hook: exit 0, no error; the server: initialize and tools/list)."),
        ("store", "string|null", "The store it reached (absolute); null when it found none."),
        ("found_by", "string|null", "What led to it: --root, MEMCTL_ROOT, cwd, CLAUDE_PROJECT_DIR or --store."),
        ("error", "string|null", "Why it does not answer, one line (the server's own last line when it exited); null when it answers."),
        ("seconds", "number", "How long the run took."),
    ),
    "agent_change": (
        ("scope", "string", "project, local or user."),
        ("dry_run", "boolean", "Nothing was written."),
        ("changes", "list[@agent_file_change]", "Per file written (or that would be)."),
        ("found?", "list[string]", "With --all: each agent found on this machine and what showed it (`codex: /home/me/.codex`)."),
    ),
    "sync": (
        ("remote", "string", "The remote."),
        ("branch", "string", "The branch."),
        ("incoming", "integer", "Commits that came in."),
        ("outgoing", "integer", "Commits the remote did not have."),
        ("pushed", "boolean", "Pushed."),
        ("files_in", "list[string]", "Files the merge changed here."),
        ("resolved", "list[@resolution]", "Files memctl merged."),
        ("conflicts", "list[string]", "Conflict copies this sync created."),
        ("duplicates", "list[object]", "Unique values now repeated: ledger, column, value, count."),
        ("merge_commit", "string|null", "The merge commit."),
        ("attempts", "integer", "Fetch-merge-push attempts."),
        ("setup", "list[string]", "Merge drivers set up by this run."),
    ),
    "resolved": (
        ("name", "string", "The fact."),
        ("keep", "string", "local, remote or both."),
        ("path", "string", "The fact kept (with both: the copy's new file)."),
        ("removed", "string|null", "The conflict copy removed."),
        ("commit", "string|null", "The commit."),
    ),
}

# Shapes that are maps rather than records: (value type, meaning).
MAPS: dict[str, tuple[str, str]] = {
    "ledger_row": ("string", "A ledger record: one key per column (as declared), its value unescaped."),
}

# What each command prints with --json: case -> (form, shape). form: object (one JSON value),
# array (a JSON array of the shape), ndjson (one object per line). A case is a command path,
# optionally with the option that changes what it prints.
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("object", "init"),
    "remember": ("object", "fact_change"),
    "show": ("object", "fact"),
    "show --json -- PATH:START-END": ("object", "document_lines"),
    "list": ("array", "fact"),
    "log": ("array", "log_entry"),
    "forget": ("object", "fact_change"),
    "forget --policies": ("object", "policy_run"),
    "restore": ("object", "fact_change"),
    "pin": ("object", "fact_change"),
    "unpin": ("object", "fact_change"),
    "index": ("object", "index_write"),
    "index --check": ("object", "index_check"),
    "doctor": ("object", "check"),
    "ledger create": ("object", "ledger_created"),
    "ledger adopt": ("object", "ledger_created"),
    "ledger append": ("object", "ledger_write"),
    "ledger commit": ("object", "ledger_write"),
    "ledger list": ("array", "ledger"),
    "ledger rows": ("array", "ledger_row"),
    "ledger stats": ("array", "value_count"),
    "ledger dups": ("array", "value_count"),
    "ledger check": ("object", "check"),
    "ledger verify": ("object", "verification"),
    "episode add": ("object", "episode"),
    "episode list": ("array", "episode"),
    "episode import": ("object", "episode_import"),
    "episode recall": ("array", "hit"),
    "recall": ("array", "hit"),
    "recall --explain": ("array", "hit"),
    "recall --paths": ("array", "hit_path"),
    "recall --queries": ("ndjson", "query_hits"),
    "context": ("object", "context"),
    "used": ("object", "used"),
    "audit": ("array", "audit_row"),
    "audit --never-shown": ("array", "fact"),
    "near-dup check": ("object", "near_dup_check"),
    "near-dup check --stdin": ("ndjson", "near_dup_check"),
    "near-dup scan": ("object", "near_dup_scan"),
    "near-dup calibrate": ("object", "calibration"),
    "cache status": ("object", "cache_status"),
    "cache rebuild": ("array", "cache_rebuilt"),
    "cache clear": ("object", "cache_cleared"),
    "embed-server": ("object", "embed_server"),
    "state update": ("object", "state_update"),
    "state show": ("object", "state"),
    "state history": ("array", "state_version"),
    "state check": ("object", "state_check"),
    "schedule render": ("object", "schedule_render"),
    "schedule status": ("array", "job"),
    "schedule install": ("object", "schedule_plan"),
    "schedule uninstall": ("object", "schedule_plan"),
    "maintain": ("object", "maintenance"),
    "trust": ("object", "trust"),
    "trust --list": ("object", "trust"),
    "procedure record": ("object", "procedure_recorded"),
    "procedure list": ("array", "procedure"),
    "procedure best": ("object", "procedure"),
    "procedure evolve": ("object", "procedure_evolved"),
    "conflicts": ("object", "conflicts"),
    "consolidate": ("object", "consolidation"),
    "distill": ("object", "distillation"),
    "agent status": ("array", "agent_status"),
    "agent install": ("object", "agent_change"),
    "agent uninstall": ("object", "agent_change"),
    "sync": ("object", "sync"),
    "resolve": ("object", "resolved"),
    "source add": ("object", "source"),
    "source list": ("array", "source"),
    "source remove": ("object", "source_removed"),
    "source index": ("array", "source_index"),
    "source status": ("array", "source_status"),
}


# The MCP server's tools (memctl/integrations/mcp_server.py): the structured content each returns,
# `mcp_<tool>`. Their outputSchema is generated from these (json_schema), and
# tests/cli/test_mcp_cli.py checks real results against it. Kept apart from SHAPES: no command prints them.
_NOTES: Field = ("notes?", "list[string]", "Notes on the answer: texts still being embedded, secrets redacted.")
_REDACTED: Field = ("redacted?", "map[integer]", "Only when secrets were redacted before writing (a text, or the query the access log keeps): how many, by kind.")
_CHANGE = SHAPES["fact_change"][:4]
_MCP_RESULTS: dict[str, tuple[Field, ...]] = {
    "mcp_remember": (*_CHANGE,
                     ("similar", "list[@mcp_similar_fact]", "Live facts close to the description."),
                     ("superseded", "list[string]", "Files archived by `supersedes`.")),
    "mcp_recall": (("query", "string", "The query."), ("hits", "list[@hit]", "Its hits, best first."),
                   ("notes", "list[string]", "Notes on the answer (a model still loading, texts still being embedded).")),
    "mcp_context": SHAPES["context"],
    "mcp_show": (*SHAPES["fact"], ("text", "string", "The fact file's full text.")),
    "mcp_forget": _CHANGE,
    "mcp_episode_add": SHAPES["episode"],
    "mcp_near_dup": SHAPES["near_dup_check"],
    "mcp_ledger_append": SHAPES["ledger_write"],
    "mcp_state_show": (*SHAPES["state"], ("text", "string", "STATE.md's full text.")),
    "mcp_get": (("path", "string", "The file, as the chunk's hit names it."),
                ("start", "integer", "The first line given (from 1)."), ("end", "integer", "The last line given."),
                ("source", "string", "The declared source that holds the file."),
                ("source_description", "string", "The source's one-line description."),
                ("text", "string", "The lines, as the file holds them now.")),
}
# Any tool may add notes, and report secrets redacted (a write's text, or the query the access log keeps).
MCP_SHAPES: dict[str, tuple[Field, ...]] = {
    "mcp_similar_fact": (("name", "string", "The similar fact's name."), *SHAPES["similar_fact"]),
    **{shape: (*fields, *(extra for extra in (_NOTES, _REDACTED)
                          if extra[0].rstrip("?") not in {name.rstrip("?") for name, _, _ in fields}))
       for shape, fields in _MCP_RESULTS.items()},
}


def _fields(shape: str) -> tuple[Field, ...]:
    return SHAPES[shape] if shape in SHAPES else MCP_SHAPES[shape]


# ---------------------------------------------------------------- validation

def _split(type_: str) -> list[str]:
    """`list[a|b]|null` -> ["list[a|b]", "null"]: alternatives at the top level only."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(type_):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "|" and depth == 0:
            parts.append(type_[start:i])
            start = i + 1
    parts.append(type_[start:])
    return parts


def _check(value: Any, type_: str, where: str, problems: list[str], seen: set | None) -> None:
    alternatives = _split(type_)
    if len(alternatives) == 1:  # say what inside it is wrong
        before = len(problems)
        if not _matches(value, type_, where, problems, seen) and len(problems) == before:
            problems.append(f"{where}: {value!r:.80} is not {type_}")
        return
    for alternative in alternatives:
        if _matches(value, alternative, where, [], None):
            _matches(value, alternative, where, problems, seen)
            return
    problems.append(f"{where}: {value!r:.80} is not {type_}")


def _matches(value: Any, type_: str, where: str, problems: list[str], seen: set | None) -> bool:
    before = len(problems)
    if type_ == "null":
        return value is None
    if type_ == "string":
        return isinstance(value, str)
    if type_ == "boolean":
        return isinstance(value, bool)
    if type_ == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_ == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if type_ == "object":
        return isinstance(value, dict)
    if type_.startswith("list[") and type_.endswith("]"):
        if not isinstance(value, list):
            return False
        for i, item in enumerate(value):
            _check(item, type_[5:-1], f"{where}[{i}]", problems, seen)
        return len(problems) == before
    if type_.startswith("map[") and type_.endswith("]"):
        if not isinstance(value, dict):
            return False
        for key, item in value.items():
            _check(item, type_[4:-1], f"{where}.{key}", problems, seen)
        return len(problems) == before
    if type_.startswith("@"):
        if not isinstance(value, dict):
            return False
        _object(value, type_[1:], where, problems, seen)
        return len(problems) == before
    raise ValueError(f"unknown type {type_!r} in jsonshape.SHAPES")


def _object(value: dict, shape: str, where: str, problems: list[str], seen: set | None) -> None:
    if shape in MAPS:
        if seen is not None:
            seen.add((shape, ""))
        _check(value, f"map[{MAPS[shape][0]}]", where, problems, seen)
        return
    fields = _fields(shape)
    names = {name.rstrip("?"): (name.endswith("?"), type_) for name, type_, _ in fields}
    for key in value:
        if key not in names:
            problems.append(f"{where}: field {key!r} is not documented in shape {shape}")
    for name, (optional, type_) in names.items():
        if name not in value:
            if not optional:
                problems.append(f"{where}: field {name!r} of shape {shape} is missing")
            continue
        if seen is not None:
            seen.add((shape, name))
        _check(value[name], type_, f"{where}.{name}", problems, seen)


def validate(document: Any, form: str, shape: str, *, seen: set | None = None) -> list[str]:
    """What does not match: [] when `document` is one `shape` (form object or ndjson) or a list of them (array)."""
    problems: list[str] = []
    if form == "array":
        _check(document, f"list[@{shape}]", "$", problems, seen)
    else:
        _check(document, f"@{shape}", "$", problems, seen)
    return problems


# ---------------------------------------------------------------- docs

def render_markdown() -> str:
    """The generated part of docs/JSON.md: one table per shape, and which commands print it."""
    by_shape: dict[str, list[str]] = {}
    for case, (form, shape) in COMMANDS.items():
        by_shape.setdefault(shape, []).append(f"`memctl {case}`" + {"array": " (array)", "ndjson": " (one per line)"}.get(form, ""))
    out = []
    for shape, fields in {**SHAPES, **MCP_SHAPES}.items():
        out.append(f"### {shape}\n")
        if shape in by_shape:
            out.append("Printed by " + ", ".join(sorted(by_shape[shape])) + ".\n")
        if shape.startswith("mcp_") and shape[4:] != "similar_fact":
            out.append(f"Returned by the MCP tool `{shape[4:]}` (its structuredContent; its outputSchema is this table).\n")
        if shape in MAPS:
            out.append(f"An object: {MAPS[shape][1]} Every value is a `{MAPS[shape][0]}`.\n")
            continue
        out.append("| field | type | meaning |\n|---|---|---|")
        for name, type_, meaning in fields:
            out.append(f"| `{name}` | `{type_.replace('|', ' or ')}` | {meaning} |")
        out.append("")
    return "\n".join(out)



# ---------------------------------------------------------------- JSON Schema

def json_schema(type_: str, meaning: str | None = None) -> dict[str, Any]:
    """The JSON Schema of a type as SHAPES writes it (`@mcp_recall`, `list[string]|null`...), shapes inlined."""
    alternatives = _split(type_)
    if len(alternatives) > 1:
        schema: dict[str, Any] = {"anyOf": [json_schema(a) for a in alternatives]}
    elif type_ in ("string", "integer", "number", "boolean", "object", "null"):
        schema = {"type": type_}
    elif type_.startswith("list["):
        schema = {"type": "array", "items": json_schema(type_[5:-1])}
    elif type_.startswith("map["):
        schema = {"type": "object", "additionalProperties": json_schema(type_[4:-1])}
    elif type_.startswith("@") and type_[1:] in MAPS:
        schema = json_schema(f"map[{MAPS[type_[1:]][0]}]")
    elif type_.startswith("@"):
        fields = _fields(type_[1:])
        schema = {"type": "object",
                  "properties": {name.rstrip("?"): json_schema(t, meaning) for name, t, meaning in fields},
                  "required": [name for name, _, _ in fields if not name.endswith("?")],
                  "additionalProperties": False}
    else:
        raise ValueError(f"unknown type {type_!r} in jsonshape")
    if meaning:
        schema["description"] = meaning
    return schema
