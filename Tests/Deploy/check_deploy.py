#!/usr/bin/env python3
"""The deploy files start: each one's configuration, as it would reach `latchkey serve`, passes
`latchkey config check` (and fails it without the key-encryption key where serve would refuse).

No container engine or cluster runs here, so the proof is the environment each file gives serve:
  - deploy/kubernetes/latchkey.yaml (read with PyYAML): the Deployment's env, envFrom Secrets and
    the Secret volume the KEK file comes from;
  - deploy/systemd/latchkey.service: EnvironmentFile= (deploy/systemd/latchkey.env), Environment=,
    LoadCredential= and the %d specifier;
  - compose.yaml: the latchkey service's environment and its secret;
  - deploy/container/Containerfile and .dockerignore: HEALTHCHECK runs `latchkey healthcheck`, the
    image ships no wellknown/, the build context leaves .build/ and data/ out.
Files the operator makes (the KEK) are made here as the comments in those files say.
usage: check_deploy.py LATCHKEY_BINARY
"""
import base64
import os
import re
import subprocess
import sys
import tempfile

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
failures = []


def check(condition, message):
    print(("ok   " if condition else "FAIL ") + message)
    if not condition:
        failures.append(message)


def config_check(binary, env, label):
    """Runs `latchkey config check` with exactly `env` (nothing inherited)."""
    run = subprocess.run([binary, "config", "check"], env=env, capture_output=True, text=True, timeout=30)
    print(f"--- {label}: latchkey config check (exit {run.returncode})")
    print("\n".join("     " + l for l in (run.stdout + run.stderr).splitlines() if "[default]" not in l))
    return run


def new_kek():
    return base64.b64encode(os.urandom(32)).decode() + "\n"


def place(root, path, content):
    """Writes `content` where the file would be in the container/host, under `root`."""
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(content)
    return full


def rewrite_files(env, root):
    """`@/path` values point into `root`, where the file was placed."""
    return {k: ("@" + os.path.join(root, v[1:].lstrip("/")) if v.startswith("@") else v) for k, v in env.items()}


def expect_starts(binary, env, label, warnings=()):
    run = config_check(binary, env, label)
    check(run.returncode == 0, f"{label}: serve would start")
    check("LATCHKEY_KEY_ENCRYPTION_KEY" in run.stdout and "<set, redacted>" in run.stdout,
          f"{label}: the key-encryption key is set, and redacted")
    for w in warnings:
        check(w in run.stdout, f"{label}: warns about {w}")
    check("not a Latchkey setting" not in run.stdout, f"{label}: no unknown LATCHKEY_ variable")
    return run


def expect_refused_without_kek(binary, env, label):
    env = {k: v for k, v in env.items() if k != "LATCHKEY_KEY_ENCRYPTION_KEY"}
    run = config_check(binary, env, label + " without the KEK")
    check(run.returncode == 1 and "LATCHKEY_KEY_ENCRYPTION_KEY is not set" in run.stdout,
          f"{label}: without the KEK, refused as serve refuses")


def kubernetes(binary, root):
    with open(os.path.join(REPO, "deploy/kubernetes/latchkey.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    kinds = {d["kind"]: d for d in docs}
    secrets = {d["metadata"]["name"]: d.get("stringData", {}) for d in docs if d["kind"] == "Secret"}
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {}
    for ref in container.get("envFrom", []):
        name = ref["secretRef"]["name"]
        check(name in secrets, f"kubernetes: envFrom Secret {name} is in the manifest")
        env.update(secrets.get(name, {}))
    for item in container.get("env", []):
        check("value" in item, f"kubernetes: env {item['name']} has a literal value")
        env[item["name"]] = str(item.get("value", ""))
    # Secret volumes: the operator-made latchkey-kek (kubectl create secret … --from-literal=kek=…).
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        secret = volumes[mount["name"]].get("secret", {}).get("secretName")
        if secret == "latchkey-kek":
            place(root, mount["mountPath"] + "/kek", new_kek())
        elif secret in secrets:
            for key, value in secrets[secret].items():
                place(root, mount["mountPath"] + "/" + key, value)
    # The KEK file must be readable by the user the pod runs as (Secret files belong to root, and to
    # fsGroup when one is set): a 0400 file with a non-root user crash-loops on "cannot read".
    ctx = pod.get("securityContext", {})
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]].get("secret", {})
        if volume.get("secretName") == "latchkey-kek":
            mode = volume.get("defaultMode", 0o644)
            readable = ctx.get("runAsUser") == 0 or mode & 0o004 or (mode & 0o040 and ctx.get("fsGroup") is not None)
            check(bool(readable), f"kubernetes: the KEK file (mode {oct(mode)}) is readable by the pod's user")
            check(not mode & 0o004, "kubernetes: the KEK file is not world-readable")
    with open(os.path.join(REPO, "deploy/container/Containerfile")) as f:
        uid = re.search(r"useradd [^&]*--uid (\d+)", f.read())
    check(uid is not None and ctx.get("runAsUser") == int(uid.group(1)), "kubernetes: runAsUser is the image's latchkey uid")
    kek = env.get("LATCHKEY_KEY_ENCRYPTION_KEY", "")
    check(kek.startswith("@/var/run/secrets/latchkey/"), "kubernetes: the KEK is read from the Secret volume")
    port = int(env["LATCHKEY_LISTEN"].rsplit(":", 1)[1])
    check(container["ports"][0]["containerPort"] == port, "kubernetes: containerPort is LATCHKEY_LISTEN's port")
    check(container["livenessProbe"]["httpGet"]["path"] == "/healthz" and container["readinessProbe"]["httpGet"]["path"] == "/readyz",
          "kubernetes: probes on /healthz and /readyz")
    check(kinds["Service"]["spec"].get("type", "ClusterIP") == "ClusterIP" and "Ingress" in kinds,
          "kubernetes: with LATCHKEY_TRUST_PROXY=1, pods are reached only through the Ingress (ClusterIP Service)")
    env = rewrite_files(env, root)
    expect_starts(binary, env, "kubernetes", warnings=["LATCHKEY_TRUST_PROXY=1", "change-me"])
    expect_refused_without_kek(binary, env, "kubernetes")


def systemd_unit(path):
    """[Service] key=value lines (repeated keys kept in order)."""
    out, section = [], None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("["):
                section = line.strip("[]")
            elif section == "Service" and "=" in line:
                k, v = line.split("=", 1)
                out.append((k.strip(), v.strip()))
    return out


def env_file(path):
    env = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                k, v = line.split("=", 1)
                env[k] = v.strip('"')
    return env


def systemd(binary, root):
    unit = systemd_unit(os.path.join(REPO, "deploy/systemd/latchkey.service"))
    credentials = os.path.join(root, "run/credentials/latchkey.service")
    env = {}
    loaded = []
    for k, v in unit:
        if k == "EnvironmentFile":
            check(v == "/etc/latchkey/latchkey.env", "systemd: EnvironmentFile is /etc/latchkey/latchkey.env")
            env.update(env_file(os.path.join(REPO, "deploy/systemd/latchkey.env")))  # what the unit says to install there
        elif k == "Environment":
            name, value = v.split("=", 1)
            env[name] = value.replace("%d", credentials)
        elif k == "LoadCredential":
            name, source = v.split(":", 1)
            loaded.append(name)
            place(credentials, name, new_kek())  # `openssl rand -base64 32 > /etc/latchkey/kek`, copied by systemd
    check("kek" in loaded, "systemd: LoadCredential=kek:…")
    check(env.get("LATCHKEY_KEY_ENCRYPTION_KEY") == "@" + credentials + "/kek", "systemd: the KEK is read from %d/kek")
    expect_starts(binary, env, "systemd", warnings=["LATCHKEY_TRUST_PROXY=1", "change-me"])
    expect_refused_without_kek(binary, env, "systemd")


def compose(binary, root):
    with open(os.path.join(REPO, "compose.yaml")) as f:
        doc = yaml.safe_load(f)
    services = doc["services"]
    check({"postgres", "mail", "latchkey"} <= set(services), "compose: PostgreSQL, a mail catcher and Latchkey")
    service = services["latchkey"]
    env = {k: str(v) for k, v in service["environment"].items()}
    for name in service.get("secrets", []):
        check(name in doc.get("secrets", {}), f"compose: secret {name} is declared")
        place(root, f"/run/secrets/{name}", new_kek())  # `openssl rand -base64 32 > kek.b64`
    db = services["postgres"]["environment"]
    check(env["DATABASE_URL"] == f"postgresql://{db['POSTGRES_USER']}:{db['POSTGRES_PASSWORD']}@postgres:5432/{db['POSTGRES_DB']}",
          "compose: DATABASE_URL names the postgres service's user, password and database")
    check(env.get("LATCHKEY_SMTP_URL", "").startswith("smtp://mail:"), "compose: mail goes to the mail catcher")
    check(service["build"]["dockerfile"] == "deploy/container/Containerfile", "compose: builds the Containerfile")
    env = rewrite_files(env, root)
    expect_starts(binary, env, "compose")


def container():
    with open(os.path.join(REPO, "deploy/container/Containerfile")) as f:
        text = f.read()
    health = re.search(r"^HEALTHCHECK .*CMD (\[.*\])\s*$", text, re.M)
    check(health is not None and '"/usr/bin/latchkey", "healthcheck"' in health.group(1),
          "container: HEALTHCHECK runs `latchkey healthcheck` (exec form, no shell)")
    check(re.search(r"^COPY dist/latchkey_\*\.deb ", text, re.M) and "dpkg -i /tmp/latchkey_*.deb" in text,
          "container: the .deb of scripts/package.sh is installed (the binary is where HEALTHCHECK runs it)")
    check(re.search(r"^USER latchkey$", text, re.M), "container: runs as the package's non-root user")
    check(not re.search(r"^COPY\s+wellknown", text, re.M), "container: wellknown/ is not shipped")
    with open(os.path.join(REPO, ".dockerignore")) as f:
        ignored = {l.strip() for l in f if l.strip() and not l.startswith("#")}
    check({".build/", "data/", ".git/"} <= ignored, ".dockerignore: .build/, data/ and .git/ stay out of the build context")


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        for name, step in [("kubernetes", kubernetes), ("systemd", systemd), ("compose", compose)]:
            root = os.path.join(tmp, name)
            os.makedirs(root)
            step(binary, root)
    container()
    if failures:
        print(f"deploy check: {len(failures)} failure(s)")
        sys.exit(1)
    print("deploy check: every deploy file gives serve a configuration it starts with")


if __name__ == "__main__":
    main()
