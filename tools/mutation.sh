#!/usr/bin/env bash
# Mutation testing: how many deliberately broken versions of a package's
# code its own tests catch. Usage:
#
#   tools/mutation.sh                 # fp8 recipe precision passes checkpoint optim graph
#   tools/mutation.sh fp8 optim       # chosen packages
#
# It installs gremlins (pinned below) if it is missing, runs it on each
# package with its default mutators and prints the efficacy line
# (killed / (killed + lived)). GOFLAGS=-count=1 matters: gremlins times
# each mutant against a coverage run, and a cached run would make every
# mutant look slow. Survivors shown to be equivalent are listed in each
# package's MUTANTS.md. Expect roughly 5–15 minutes per package on 2
# cores.
set -euo pipefail
cd "$(dirname "$0")/.."
version=v0.6.0
bin="$(go env GOPATH)/bin/gremlins"
if ! [ -x "$bin" ] || ! go version -m "$bin" | grep -q "gremlins.*$version"; then
	go install "github.com/go-gremlins/gremlins/cmd/gremlins@$version"
fi
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(fp8 recipe precision passes checkpoint optim graph)
out="${TMPDIR:-/tmp}/octet-mutation"
mkdir -p "$out"
for p in "${pkgs[@]}"; do
	echo "== $p"
	f="${p//\//_}" # cmd/octet → cmd_octet
	GOFLAGS=-count=1 "$bin" unleash --workers "$(nproc)" --timeout-coefficient 4 \
		-o "$out/$f.json" "./$p" >"$out/$f.txt" 2>&1 || true
	grep -E "LIVED|Killed:|Test efficacy|Mutator coverage" "$out/$f.txt" || tail -5 "$out/$f.txt"
done
echo "full reports: $out/<package, / as _>.txt and .json"
