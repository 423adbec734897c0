#!/usr/bin/env bash
# The demo itself: a copy of the example store in a temp dir, then the commands
# an agent, a cron job and a person would run. Usage: demo_workflow.sh [MEMCTL]
set -euo pipefail
memctl=${1:-memctl}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/memctl-demo.XXXXXX")
server=''
trap '[ -z "$server" ] || kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
export MEMCTL_ROOT="$work/store" MEMCTL_AGENT=demo-agent HF_HUB_OFFLINE=1

if [ -t 2 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
step() { printf '\n%s$ %s%s\n' "$bold" "$*" "$plain" >&2; }
# One word as it must be typed to reach the command unchanged: bare when it holds nothing a shell
# reads (Japanese included in what gets quoted), else in single quotes, a ' inside as '\''.
quote() {
  local word=$1
  if [[ -n $word && $word != *[!A-Za-z0-9_./:=,@%+-]* ]]; then printf '%s' "$word"
  else printf "'%s'" "${word//\'/\'\\\'\'}"; fi
}
command_line() { local line='memctl' word; for word in "$@"; do line+=" $(quote "$word")"; done; printf '%s' "$line"; }
run() { step "$(command_line "$@")"; "$memctl" "$@"; }
expect_fail() { step "$(command_line "$@")   # expected to be refused"; if "$memctl" "$@"; then echo "demo: expected a refusal" >&2; exit 1; else echo "(exit $?)" >&2; fi; }

mkdir -p "$work/store"
step "export MEMCTL_ROOT=$(quote "$work/store")   # every command below works on this copy"
cp -R "$repo/memory" "$repo/ledgers" "$repo/state" "$repo/memctl.toml" "$work/store/"
run init "$work/store"
git -C "$work/store" log --oneline | cat

run list
run show feedback_zenn_rate_limit
run remember feedback-title-length --type feedback \
  --description "記事タイトルは32文字以内にする" \
  --why "長いタイトルはSNSで切れてクリック率が落ちた" \
  --how "公開前に文字数を数える" --tag publishing
expect_fail remember feedback-title-length --description "同じ名前はもう一度書けない"
expect_fail remember title-rule --description "記事タイトルは３２文字以内にする"
run remember project-morning-report-v2 --type project \
  --description "The morning report runs from launchd at 08:30 and commits state/STATE.md" \
  --supersedes project-morning-report
run show project-morning-report
run forget reference-jsts --reason "moved to docs/EMBEDDINGS.md"
run index --check
step "sed -n '/memctl:index:begin/,/memctl:index:end/p' memory/MEMORY.md"
sed -n '/memctl:index:begin/,/memctl:index:end/p' "$work/store/memory/MEMORY.md"
step "grep -rl 'タイトル' memory/"
grep -rl 'タイトル' "$work/store/memory/"
run log feedback-title-length
run list --json --type feedback

if "$memctl" ledger --help >/dev/null 2>&1; then
  run ledger rows article-themes
  run ledger append article-themes date=2026-11-29 platform=zenn slug=memctl-intro "theme=memctlで作るエージェントの記憶"
  expect_fail ledger append article-themes date=2026-11-29 platform=note slug=dup "theme=MCPサーバーのテストとデバッグ — stdioトランスポートの挙動を追う方法"
  run ledger stats article-themes --by platform
  run ledger verify article-themes
  run episode add "Chose plain TSV ledgers over SQLite for events" --type decision --outcome "grep and git merge keep working"
  run episode recall "ledger decision"
fi
if "$memctl" near-dup --help >/dev/null 2>&1; then
  # exit 0 = new, 1 = near-duplicate, 5 = similar (the band just below); the scores and the lexical overlap are for the caller to judge
  for text in "MCPサーバーのデバッグ手法" "MCPサーバーのテストとデバッグ方法 — stdioの挙動を追う" "猫の餌の選び方"; do
    step "memctl near-dup '$text' --ledger article-themes --column theme"
    code=0; "$memctl" near-dup "$text" --ledger article-themes --column theme --top 2 || code=$?
    echo "(exit $code)" >&2
  done
fi

run recall "記事のタイトル" --explain
if "$memctl" embed-server --help >/dev/null 2>&1; then
  # A resident model: recall's vector part is answered by it (the same hits as without it, sooner)
  step "memctl embed-server &"
  "$memctl" embed-server 2>/dev/null & server=$!
  for _ in $(seq 300); do [ -S "$work/store/.memctl/embed.sock" ] && break; sleep 0.1; done
  run recall "タイトルは何文字まで？" --k 3
  run embed-server --stop
  wait "$server" || true
  server=''
fi
run recall "when does the morning report run from launchd" --paths
run pin feedback-zenn-rate-limit
run context --query "記事を公開する" --budget 800
run audit
if "$memctl" agent --help >/dev/null 2>&1; then
  # Claude Code: what `agent install` would write, and what the per-prompt hook adds to a prompt
  mkdir -p "$work/project"
  step "cd project && memctl agent install claude-code --store $(quote "$work/store") --dry-run"
  (cd "$work/project" && "$memctl" agent install claude-code --store "$work/store" --dry-run)
  step "echo '{\"prompt\": \"記事のタイトルは何文字まで？\"}' | memctl hook prompt"
  echo '{"prompt": "記事のタイトルは何文字まで？"}' | "$memctl" hook prompt
  python="$(dirname "$memctl")/python"
  if [ -x "$python" ] && "$python" -c "import mcp" 2>/dev/null; then
    step "an MCP client over stdio: memctl mcp, tools/list, then recall"
    "$python" - "$memctl" <<'PY'
import sys, anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
import os

async def main():
    params = StdioServerParameters(command=sys.argv[1], args=["mcp"], env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        print("tools:", ", ".join(t.name for t in (await client.list_tools()).tools))
        result = await client.call_tool("recall", {"query": "記事のタイトル", "k": 2})
        for hit in result.structured_content["hits"]:
            print(f"recall: {hit['name']} ({hit['score']}) {hit['description']}")

anyio.run(main)
PY
  fi
fi
if "$memctl" state --help >/dev/null 2>&1; then
  step "echo '{\"completed\": 48, \"in_progress\": 1, \"pending\": 2, \"approvals\": 0}' | memctl state update --from-json -"
  echo '{"completed": 48, "in_progress": 1, "pending": 2, "approvals": 0}' | "$memctl" state update --from-json -
  run state show
  run state check --max-age 24h
fi
if "$memctl" episode import --help >/dev/null 2>&1; then
  # What an earlier agent session said, taken in from its transcript (secrets redacted), then recalled
  run episode import claude-code "$repo"/tests/fixtures/claude-code/*.jsonl
  run recall --source episodes "which day do we deploy to production" --k 3
fi
if "$memctl" source --help >/dev/null 2>&1; then
  # Documents as memory: notes stay where they are, indexed as chunks, recalled with their place
  docs="$repo/bench/data/docs-en"  # the documentation of a made-up task runner, written for the tests
  run source add brindle "$docs/install.md" "$docs/faq.md" "$docs/troubleshooting.md" \
    --description "Brindle's documentation (a made-up task runner)"
  run source index
  run recall --source docs "Does brindle run on FreeBSD?" --k 2
  hit=$("$memctl" recall --source docs "Does brindle run on FreeBSD?" --k 1 --paths --no-log)
  run show "$hit"
fi
if "$memctl" sync --help >/dev/null 2>&1; then
  # A second machine: a bare remote, a clone, a fact written there, `memctl sync` on both sides
  git init -q --bare "$work/remote.git"
  git -C "$work/store" remote add origin "$work/remote.git"
  run sync
  git clone -q "$work/remote.git" "$work/laptop"
  run --root "$work/laptop" sync --setup
  run --root "$work/laptop" remember laptop-note --type project --description "ノートPCで書いた事実も同じメモリに入る"
  run --root "$work/laptop" sync
  run sync
  run show laptop-note
fi
run doctor
step "git log --oneline"
git -C "$work/store" log --oneline | cat
echo >&2
echo "demo: done (the store was a throwaway copy in $work)" >&2
