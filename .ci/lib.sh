# Shared helpers for the scripts in .ci/ (sourced, not run).

# Cargo's target directory for this workspace: honours CARGO_TARGET_DIR and build.target-dir.
target_dir() {
  cargo metadata --format-version 1 --no-deps --locked \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])'
}

# A free TCP port on 127.0.0.1.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
