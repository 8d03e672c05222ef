"""A planted corpus for the scrubber: secrets and personal data in realistic text.

Everything is made here from a fixed seed, no downloads. The secret-shaped
values are generated at import, so this file holds no key a secret scanner
would flag, and every run sees the same strings.

- `PLANTED`: comments, conversation messages, tool-call outputs (env dumps,
  config files, logs, stack traces) and dogfooding reports. Each item knows its
  planted strings, the placeholder each must become, and the exact scrubbed
  text (the template with each planted string swapped for its placeholder).
- `ROW_EXAMPLES`: one planted example per row of `feedback.scrubber.PATTERNS`.
- `CONVERSATIONS`: JSON-shaped rated contexts (messages, tool calls) for
  `scrub_json`, with their planted strings.
- `CLEAN`: ordinary code and prose with nothing to scrub, to count false
  positives: Python/TS/Go, git hashes, UUIDs, versions, dates, timestamps,
  line:col numbers, hex colours, base64 fixtures, URLs without credentials,
  localhost ports, tokenizer settings.

Templates mark a planted value as `<<kind>>`; `<<kind|LABEL>>` says which
placeholder it must become where the context decides (a bearer token in an
Authorization header becomes [SECRET:authorization]); `<<kind#n>>` repeats
the same value within one item.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
from dataclasses import dataclass, field
from typing import Any

_rng = random.Random(20240611)

UPPER_DIGITS = string.ascii_uppercase + string.digits
ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
HEX = "0123456789abcdef"

FIRST = ["alice", "bob", "carol", "dmitri", "esther", "farid", "grace", "hiro", "ines", "jonas", "keiko", "lars"]
LAST = ["nguyen", "schmidt", "okafor", "rossi", "kowalski", "tanaka", "garcia", "haddad", "lindqvist", "moreau"]
DOMAINS = ["example.com", "acme-corp.io", "mail.example.org", "users.noreply.github.com", "contoso.co.uk"]


def _s(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _mixed(alphabet: str, n: int) -> str:
    """Random string that has at least one digit and one letter."""
    while True:
        value = _s(alphabet, n)
        if any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
            return value


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt() -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(
        json.dumps({"sub": _s(string.digits, 10), "name": _rng.choice(FIRST), "iat": 1718000000}).encode()
    )
    return f"{header}.{payload}.{_b64url(_rng.randbytes(32))}"


def _pem(kind: str = "RSA ", sep: str = "\n") -> str:
    lines = [_s(B64, 64) for _ in range(5)] + [_s(B64, 24) + "=="]
    return f"-----BEGIN {kind}PRIVATE KEY-----{sep}" + sep.join(lines) + f"{sep}-----END {kind}PRIVATE KEY-----"


def _password() -> str:
    while True:
        value = _rng.choice(string.ascii_letters) + _s(ALNUM + "!^*-_+", _rng.randint(9, 15))
        if any(c.isdigit() for c in value):
            return value


def _person() -> str:
    return _rng.choice(FIRST)


def _email() -> str:
    first, last = _rng.choice(FIRST), _rng.choice(LAST)
    local = _rng.choice(
        [f"{first}.{last}", f"{first[0]}{last}", f"{first}+feedback", f"{_s(string.digits, 7)}+{first}"]
    )
    return f"{local}@{_rng.choice(DOMAINS)}"


def _octet(low: int = 10) -> int:
    return _rng.randint(low, 254)


# kind -> (generator, default placeholder)
KINDS: dict[str, tuple[Any, str]] = {
    "aws_access_key": (lambda: "AKIA" + _s(UPPER_DIGITS, 16), "[SECRET:aws_access_key]"),
    "aws_session_key": (lambda: "ASIA" + _s(UPPER_DIGITS, 16), "[SECRET:aws_access_key]"),
    "aws_secret_key": (lambda: _mixed(ALNUM + "/+", 40), "[SECRET:aws_secret_key]"),
    "gcp_api_key": (lambda: "AIza" + _s(URLSAFE, 35), "[SECRET:gcp_api_key]"),
    "gcp_oauth_token": (lambda: "ya29." + _s(URLSAFE, 72), "[SECRET:gcp_oauth_token]"),
    "private_key": (lambda: _pem(), "[SECRET:private_key]"),
    "private_key_json": (lambda: _pem("", "\\n"), "[SECRET:private_key]"),
    "openssh_key": (lambda: _pem("OPENSSH "), "[SECRET:private_key]"),
    "github_token": (lambda: "ghp_" + _s(ALNUM, 36), "[SECRET:github_token]"),
    "github_oauth": (lambda: "gho_" + _s(ALNUM, 36), "[SECRET:github_token]"),
    "github_pat": (lambda: "github_pat_" + _s(ALNUM, 22) + "_" + _s(ALNUM, 59), "[SECRET:github_token]"),
    "gitlab_token": (lambda: "glpat-" + _s(URLSAFE, 20), "[SECRET:gitlab_token]"),
    "slack_token": (
        lambda: f"xoxb-{_s(string.digits, 12)}-{_s(string.digits, 13)}-{_s(ALNUM, 24)}",
        "[SECRET:slack_token]",
    ),
    "slack_user_token": (
        lambda: f"xoxp-{_s(string.digits, 12)}-{_s(string.digits, 12)}-{_s(HEX, 32)}",
        "[SECRET:slack_token]",
    ),
    "slack_webhook": (
        lambda: f"https://hooks.slack.com/services/T{_s(UPPER_DIGITS, 8)}/B{_s(UPPER_DIGITS, 10)}/{_s(ALNUM, 24)}",
        "[SECRET:slack_webhook]",
    ),
    "stripe_key": (lambda: "sk_live_" + _s(ALNUM, 24), "[SECRET:stripe_key]"),
    "stripe_restricted": (lambda: "rk_live_" + _s(ALNUM, 24), "[SECRET:stripe_key]"),
    "webhook_secret": (lambda: "whsec_" + base64.b64encode(_rng.randbytes(24)).decode(), "[SECRET:webhook_secret]"),
    "anthropic_key": (lambda: "sk-ant-api03-" + _mixed(URLSAFE, 93) + "AA", "[SECRET:anthropic_key]"),
    "openai_key": (lambda: "sk-proj-" + _mixed(URLSAFE, 74), "[SECRET:openai_key]"),
    "openai_legacy_key": (lambda: "sk-" + _mixed(ALNUM, 48), "[SECRET:openai_key]"),
    "huggingface_token": (lambda: "hf_" + _s(ALNUM, 34), "[SECRET:huggingface_token]"),
    "npm_token": (lambda: "npm_" + _s(ALNUM, 36), "[SECRET:npm_token]"),
    "pypi_token": (lambda: "pypi-AgEIcHlwaS5vcmc" + _s(URLSAFE, 64), "[SECRET:pypi_token]"),
    "sendgrid_key": (lambda: f"SG.{_s(URLSAFE, 22)}.{_s(URLSAFE, 43)}", "[SECRET:sendgrid_key]"),
    "jwt": (_jwt, "[SECRET:jwt]"),
    "url_password": (lambda: _mixed(ALNUM, 14), "[SECRET:url_password]"),
    "bearer": (lambda: _mixed(ALNUM + "-_.", 40), "[SECRET:bearer_token]"),
    "basic_auth": (lambda: base64.b64encode(f"{_person()}:{_password()}".encode()).decode(), "[SECRET:authorization]"),
    "password": (_password, "[SECRET:password]"),
    "password_word": (
        lambda: _rng.choice(["sunflower", "correcthorse", "letmeinplease", "bluebird"]),
        "[SECRET:password]",
    ),
    "secret": (lambda: _mixed(ALNUM, 32), "[SECRET:secret]"),
    "api_key": (lambda: _mixed(HEX, 32), "[SECRET:api_key]"),
    "token": (lambda: _mixed(ALNUM, 40), "[SECRET:token]"),
    "email": (_email, "[EMAIL]"),
    "phone_intl_uk": (lambda: f"+44 20 7946 0{_s(string.digits, 3)}", "[PHONE]"),
    "phone_intl_us": (lambda: f"+1 (415) 555-01{_s(string.digits, 2)}", "[PHONE]"),
    "phone_intl_de": (lambda: f"+49 30 {_s('123456789', 4)} {_s(string.digits, 4)}", "[PHONE]"),
    "phone_intl_fr": (lambda: "+33 6 " + " ".join(_s(string.digits, 2) for _ in range(4)), "[PHONE]"),
    "phone_intl_compact": (lambda: "+4915" + _s(string.digits, 9), "[PHONE]"),
    "phone_us": (lambda: f"415-555-01{_s(string.digits, 2)}", "[PHONE]"),
    "phone_us_paren": (lambda: f"(212) 555-01{_s(string.digits, 2)}", "[PHONE]"),
    "phone_us_dots": (lambda: f"646.555.01{_s(string.digits, 2)}", "[PHONE]"),
    "phone_uk": (lambda: f"020 7946 0{_s(string.digits, 3)}", "[PHONE]"),
    "phone_fr": (lambda: "06 " + " ".join(_s(string.digits, 2) for _ in range(4)), "[PHONE]"),
    "phone_nl": (lambda: "06-" + _s("123456789", 1) + _s(string.digits, 7), "[PHONE]"),
    "phone_short": (lambda: f"555 01{_s(string.digits, 2)}", "[PHONE]"),
    "ipv4_private": (lambda: f"10.{_octet(0)}.{_octet(0)}.{_octet()}", "[IP]"),
    "ipv4_lan": (lambda: f"192.168.{_rng.randint(0, 9)}.{_octet()}", "[IP]"),
    "ipv4_public": (lambda: f"203.0.113.{_octet()}", "[IP]"),
    "ipv4_hostname": (lambda: f"ip-10-0-{_rng.randint(0, 20)}-{_octet()}", "[IP]"),
    "ipv6": (lambda: f"2001:db8:85a3::8a2e:370:{_s(HEX, 4)}", "[IP]"),
    "ipv6_link_local": (lambda: f"fe80::{_s(HEX, 3)}:{_s(HEX, 4)}:fe{_s(HEX, 2)}:{_s(HEX, 4)}", "[IP]"),
    "home_linux": (lambda: f"/home/{_rng.choice(FIRST)}", "[PATH_HOME]"),
    "home_mac": (lambda: f"/Users/{_rng.choice(FIRST)}.{_rng.choice(LAST)}", "[PATH_HOME]"),
    "home_windows": (lambda: f"C:\\Users\\{_rng.choice(FIRST).title()}", "[PATH_HOME]"),
    "home_windows_spaced": (
        lambda: f"C:\\Users\\{_rng.choice(FIRST).title()} {_rng.choice(LAST).title()}",
        "[PATH_HOME]",
    ),
    "home_windows_json": (lambda: f"C:\\\\Users\\\\{_rng.choice(FIRST)}", "[PATH_HOME]"),
}

_MARK = re.compile(r"<<(\w+)(?:#(\d+))?(?:\|([A-Z_]+(?::[a-z0-9_]+)?))?>>")


@dataclass(frozen=True)
class Planted:
    kind: str  # comment, message, tool_output, report
    text: str
    expected: str  # the exact scrubbed text
    planted: list[tuple[str, str]] = field(default_factory=list)  # (value, placeholder)


def render(template: str) -> tuple[str, str, list[tuple[str, str]]]:
    """Fill a template: (text, expected scrubbed text, [(planted value, placeholder)])."""
    same: dict[tuple[str, str], str] = {}
    planted: list[tuple[str, str]] = []
    text_parts: list[str] = []
    expected_parts: list[str] = []
    position = 0
    for m in _MARK.finditer(template):
        kind, tag, label = m.groups()
        make, placeholder = KINDS[kind]
        if label:
            placeholder = f"[{label}]"
        if tag and (kind, tag) in same:
            value = same[(kind, tag)]
        else:
            value = make()
            if tag:
                same[(kind, tag)] = value
        literal = template[position : m.start()]
        text_parts += [literal, value]
        expected_parts += [literal, placeholder]
        planted.append((value, placeholder))
        position = m.end()
    text_parts.append(template[position:])
    expected_parts.append(template[position:])
    return "".join(text_parts), "".join(expected_parts), planted


def _planted(kind: str, template: str) -> Planted:
    text, expected, planted = render(template)
    return Planted(kind, text, expected, planted)


# --- one example per pattern row ----------------------------------------------
# name -> template with exactly one planted value, replaced by that row.

_ROW_TEMPLATES = {
    "private_key_block": "deploy key the agent printed:\n<<private_key>>\nthen it pushed",
    "jwt": "session cookie was <<jwt>> in the trace",
    "aws_access_key": "the agent hard-coded <<aws_access_key>> into settings.py",
    "aws_secret_key": "aws_secret_access_key = <<aws_secret_key>>",
    "gcp_api_key": "const mapsKey = '<<gcp_api_key>>';",
    "gcp_oauth_token": "gcloud auth print-access-token -> <<gcp_oauth_token>>",
    "github_token": "git remote set-url origin with <<github_token>> inline",
    "gitlab_token": "CI used <<gitlab_token>> to clone",
    "slack_token": "bot posted with <<slack_token>> again",
    "slack_webhook": "notify via <<slack_webhook>> on failure",
    "stripe_key": "stripe.api_key is <<stripe_key>> in prod",
    "webhook_secret": "signing secret <<webhook_secret>> leaked in the issue",
    "anthropic_key": "client = Anthropic(<<anthropic_key>>)",
    "openai_key": "it pasted <<openai_key>> into the notebook",
    "huggingface_token": "huggingface-cli login --token <<huggingface_token>>",
    "npm_token": "//registry.npmjs.org/:_authToken=<<npm_token>>",
    "pypi_token": "twine upload -p <<pypi_token>> dist/*",
    "sendgrid_key": "mailer configured with <<sendgrid_key>>",
    "url_password": "DATABASE_URL=postgres://app:<<url_password>>@db.internal:5432/app",
    "authorization_header": "curl -H 'Authorization: Basic <<basic_auth>>' https://api.example.com/v1/items",
    "bearer_token": "retry with bearer <<bearer>> after refresh",
    "password_assignment": "DB_PASSWORD=<<password>>",
    "secret_assignment": '"client_secret": "<<secret>>",',
    "api_key_assignment": "api_key = '<<api_key>>'",
    "token_assignment": "auth_token: <<token>>",
    "email": "please reach out to <<email>> for access",
    "home_path_unix": 'File "<<home_linux>>/src/app/main.py", line 3',
    "home_path_windows": "opened <<home_windows>>\\Documents\\notes.txt",
    "phone_international": "my cell is <<phone_intl_uk>> if the bot breaks again",
    "phone_us": "escalate to <<phone_us>> after hours",
    "phone_national": "Rückruf unter <<phone_uk>> bitte",
    "phone_labelled": "Tel. <<phone_short>>",
    "ipv4": "ssh deploy@<<ipv4_private>> failed",
    "ipv4_hostname": "Connecting to <<ipv4_hostname>>.ec2.internal",
    "ipv6": "client address <<ipv6>> was blocked",
}
ROW_EXAMPLES: dict[str, Planted] = {name: _planted("example", t) for name, t in _ROW_TEMPLATES.items()}


# --- the planted corpus ---------------------------------------------------------

_TEMPLATES: list[tuple[str, str]] = [
    # Comments on a rated response (thumbs down), short.
    ("comment", "it printed my key <<aws_access_key>> straight into the chat, please purge"),
    ("comment", "👎 leaked <<github_token>> in the PR description"),
    ("comment", "Wrong answer. Also why does it know my email <<email>>?"),
    ("comment", "model echoed the Slack bot token <<slack_token>> back to me"),
    ("comment", "ignored the instruction and emailed <<email>> and <<email>>"),
    ("comment", "call me at <<phone_intl_us>> if you need the repro"),
    ("comment", "It committed .env with OPENAI_API_KEY=<<openai_key>> 🙃"),
    ("comment", "the test server <<ipv4_lan>> is internal, the agent should not scan it"),
    ("comment", "suggested hard-coding STRIPE_SECRET_KEY=<<stripe_key>>"),
    ("comment", "It used my personal HF token <<huggingface_token>> instead of the org one"),
    ("comment", "Answer was fine but it quoted my number <<phone_uk>> back"),
    ("comment", "wrote the webhook secret <<webhook_secret>> to the logs"),
    ("comment", "pasted anthropic key <<anthropic_key>> in the README example"),
    ("comment", "used <<openai_legacy_key>> from an old commit"),
    ("comment", "it ran curl --oauth2-bearer <<bearer>> against prod instead of staging"),
    ("comment", "Read <<home_mac>>/.ssh/config without asking"),
    ("comment", "ran `cat <<home_linux>>/.netrc` 🤦"),
    ("comment", "my phone number (<<phone_fr>>) ended up in the generated fixture"),
    ("comment", "it sent mail to <<email>> instead of the test inbox"),
    # Conversation messages.
    (
        "message",
        "Here is my config, why does the connection fail?\n\n```yaml\ndatabase:\n  host: <<ipv4_private>>\n"
        "  user: app\n  password: <<password>>\n  port: 5432\n```",
    ),
    (
        "message",
        "I set `export AWS_ACCESS_KEY_ID=<<aws_access_key>>` and `export AWS_SECRET_ACCESS_KEY=<<aws_secret_key>>`"
        " but boto3 still says NoCredentialsError.",
    ),
    (
        "message",
        'Can you debug this? `curl -H "Authorization: Bearer <<bearer|SECRET:authorization>>" https://api.example.com/v2/runs`',
    ),
    ("message", "Use this token for the GitHub API: <<github_pat>>"),
    ("message", "my mobile: <<phone_intl_de>>, office <<phone_us_paren>>"),
    ("message", "Try `git clone https://oauth2:<<gitlab_token>>@gitlab.example.com/ml/train.git`"),
    ("message", "Connect with psql postgresql://analyst:<<url_password>>@<<ipv4_public>>:5432/warehouse please"),
    ("message", "Why is my JWT rejected? <<jwt>>"),
    ("message", "I'm Farid, you can WhatsApp me on <<phone_intl_compact>> or mail <<email>>"),
    ("message", "settings.py has\nSECRET_KEY = '<<secret|SECRET:secret>>'\nDEBUG = True"),
    ("message", "The .npmrc contains //registry.npmjs.org/:_authToken=<<npm_token>> — is that safe?"),
    ("message", "Rotate the key AIza… no wait, here: <<gcp_api_key>>"),
    ("message", "Ping <<slack_webhook>> when the eval finishes"),
    (
        "message",
        "Here's the XML:\n<server>\n  <id>nexus</id>\n  <username>deploy</username>\n"
        "  <password><<password_word>></password>\n</server>",
    ),
    # Tool-call outputs: env dumps, config files, logs, stack traces.
    (
        "tool_output",
        "$ env | sort\nAWS_ACCESS_KEY_ID=<<aws_session_key>>\nAWS_SECRET_ACCESS_KEY=<<aws_secret_key>>\n"
        "GITHUB_TOKEN=<<github_token>>\nHF_TOKEN=<<huggingface_token>>\nHOME=<<home_linux#1>>\n"
        "LANG=C.UTF-8\nPATH=<<home_linux#1>>/.local/bin:/usr/local/bin:/usr/bin\nPWD=<<home_linux#1>>/work/app\n"
        "SLACK_BOT_TOKEN=<<slack_token>>\nTERM=xterm-256color\nDB_PASSWORD=<<password_word>>",
    ),
    (
        "tool_output",
        "$ cat .env\nDATABASE_URL=postgres://app:<<url_password>>@db:5432/app\nREDIS_URL=redis://localhost:6379/0\n"
        "STRIPE_KEY=<<stripe_restricted>>\nSENDGRID_API_KEY=<<sendgrid_key>>\nOPENAI_API_KEY=<<openai_key>>\n"
        "DJANGO_SECRET_KEY=<<secret|SECRET:secret>>\nDEBUG=1",
    ),
    (
        "tool_output",
        "Traceback (most recent call last):\n"
        '  File "<<home_linux#1>>/proj/.venv/lib/python3.11/site-packages/requests/api.py", line 73, in get\n'
        '    return request("get", url, params=params, **kwargs)\n'
        '  File "<<home_linux#1>>/proj/client.py", line 41, in fetch\n'
        '    resp = requests.get(url, headers={"Authorization": "token <<github_oauth>>"})\n'
        "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='<<ipv4_private>>', port=443): Max retries exceeded",
    ),
    (
        "tool_output",
        "2024-06-11T09:14:03.512Z INFO  request from <<ipv4_public>> user=<<email>> path=/api/v1/runs status=200 took=41ms\n"
        "2024-06-11T09:14:03.777Z WARN  token refresh failed for <<ipv6>>: 401\n"
        "2024-06-11T09:14:04.001Z INFO  worker <<ipv4_hostname>> picked job 8812",
    ),
    (
        "tool_output",
        '{\n  "type": "service_account",\n  "project_id": "acme-ml-prod",\n  "private_key_id": "3f1c2a",\n'
        '  "private_key": "<<private_key_json>>\\n",\n  "client_email": "<<email>>",\n  "client_id": "104857600000000000000"\n}',
    ),
    (
        "tool_output",
        "$ cat ~/.ssh/id_ed25519\n<<openssh_key>>\n$ ls -la\ntotal 12",
    ),
    (
        "tool_output",
        "$ cat config/production.yml\nsmtp:\n  address: smtp.example.com\n  user_name: <<email>>\n"
        '  password: <<password>>\napi:\n  api_key: <<api_key>>\n  client_secret: "<<secret>>"\n  timeout: 30',
    ),
    (
        "tool_output",
        "> POST /oauth/token HTTP/1.1\n> Host: auth.example.com\n> Authorization: Basic <<basic_auth>>\n"
        '< HTTP/1.1 200 OK\n< {"access_token": "<<token>>", "token_type": "bearer", "expires_in": 3600}',
    ),
    (
        "tool_output",
        "C:\\> type <<home_windows#1>>\\AppData\\Roaming\\npm\\etc\\npmrc\n"
        "//registry.npmjs.org/:_authToken=<<npm_token>>\n"
        "C:\\> dir <<home_windows#1>>\\Documents",
    ),
    (
        "tool_output",
        '{"cwd": "<<home_windows_json>>\\\\src\\\\app", "exit_code": 1, "stderr": "fatal: could not read Password for '
        "'https://<<email>>'\"}",
    ),
    (
        "tool_output",
        "Collecting packages...\nUploading distributions to https://upload.pypi.org/legacy/\n"
        "  using token <<pypi_token>>\nERROR 403 Forbidden",
    ),
    (
        "tool_output",
        "[2024-06-11 10:02:13,551] ERROR django.request: Internal Server Error: /api/ingest\n"
        "  REMOTE_ADDR: <<ipv4_lan>>\n  HTTP_AUTHORIZATION: Bearer <<jwt>>\n"
        '  File "<<home_mac>>/code/app/feedback/views.py", line 88, in ingest',
    ),
    (
        "tool_output",
        "kubectl get secret db -o yaml\napiVersion: v1\ndata:\n  password: <<password>>\nkind: Secret\n"
        "metadata:\n  name: db",
    ),
    (
        "tool_output",
        "gcloud auth print-access-token\n<<gcp_oauth_token>>\n",
    ),
    (
        "tool_output",
        "ifconfig eth0\neth0: flags=4163<UP,BROADCAST,RUNNING,MULTICAST>  mtu 1500\n"
        "        inet <<ipv4_private>>  netmask 255.255.255.0  broadcast <<ipv4_private>>\n"
        "        inet6 <<ipv6_link_local>>  prefixlen 64  scopeid 0x20<link>",
    ),
    (
        "tool_output",
        'Slack API response: {"ok": true, "token": "<<slack_user_token>>", "user": "U0123ABCD"}',
    ),
    # Dogfooding reports (internal staff, longer prose).
    (
        "report",
        "The agent was asked to fix the flaky login test. Instead it read <<home_linux>>/.aws/credentials, "
        "printed aws_secret_access_key = <<aws_secret_key>> into the terminal and then claimed the test passed. "
        "Repro on my laptop; ping me on <<phone_us>> or <<email>>.",
    ),
    (
        "report",
        "When I asked for a deploy script it wrote:\n\n    ssh root@<<ipv4_public>> 'docker login -u ci --password <<password>>'\n\n"
        "hmm, -p on the command line — and it used the prod host.",
    ),
    (
        "report",
        'Dogfooding, day 3: it edited settings/local.py and put api_key = "<<api_key>>" into the committed file. '
        "Expected: read it from the environment. Severity high. — Ines (<<email>>)",
    ),
    (
        "report",
        "Agent opened <<home_windows_spaced>>\\Desktop\\passwords.xlsx while looking for the test fixtures. "
        "It should never leave the repo.",
    ),
    (
        "report",
        "It generated a .pypirc with\n[pypi]\nusername = __token__\npassword = <<pypi_token|SECRET:pypi_token>>\n"
        "and ran twine upload without asking.",
    ),
    (
        "report",
        "Contact for the repro: Grace, tel <<phone_short>>, or mobile <<phone_nl>>. The agent dialled neither, "
        "it just logged them.",
    ),
    (
        "report",
        "For the record, the leaked one was token: <<token>> (already revoked). It also echoed "
        "Authorization: Bearer <<bearer|SECRET:authorization>> from the curl history.",
    ),
    (
        "report",
        "The agent tried to reach the staging DB at <<ipv4_lan>> and the metrics host <<ipv6>>, "
        "both outside the sandbox policy.",
    ),
    (
        "report",
        "Claimed success after 'fixing' auth: it had replaced the check with `if password == \"x\": return True` "
        "and the commit message included my address <<email>>. Phone <<phone_us_dots>>.",
    ),
    (
        "report",
        "The French support line it invented was real: <<phone_intl_fr>>. Please scrub.",
    ),
]

PLANTED: list[Planted] = [_planted(kind, template) for kind, template in _TEMPLATES]


# --- JSON-shaped contexts for scrub_json ----------------------------------------


def _conversation(template: dict[str, Any]) -> tuple[Any, list[tuple[str, str]]]:
    """Render every string in a nested structure; keys are left as written."""
    planted: list[tuple[str, str]] = []

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            text, _, found = render(node)
            planted.extend(found)
            return text
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(template), planted


CONVERSATIONS: list[tuple[Any, list[tuple[str, str]]]] = [
    _conversation(
        {
            "messages": [
                {"role": "user", "content": "deploy it, the key is <<aws_access_key>>"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {
                                "name": "shell",
                                "arguments": '{"cmd": "cat <<home_linux>>/.aws/credentials"}',
                            },
                        }
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": "call_1",
                    "content": "[default]\naws_access_key_id = <<aws_access_key>>\naws_secret_access_key = <<aws_secret_key>>",
                },
                {"role": "assistant", "content": "Done. I also emailed <<email>> the summary."},
            ],
            "model": "coder-2024-06",
            "rating": -1,
        }
    ),
    _conversation(
        {
            "messages": [
                {"role": "user", "content": "why does login fail? my number is <<phone_intl_uk>>"},
                {"role": "assistant", "content": "Let me look at your environment."},
            ],
            "tool_calls": [
                {
                    "name": "read_env",
                    "output": {
                        "DB_PASSWORD": "<<password|SECRET:password>>",
                        "GITHUB_TOKEN": "<<github_token>>",
                        "client_secret": "<<secret|SECRET:secret>>",
                        "OPENAI_API_KEY": "<<openai_key>>",
                        "REMOTE_HOST": "<<ipv4_private>>",
                        "max_tokens": 1024,
                        "pad_token": "<pad>",
                        "token_count": 17,
                        "debug": True,
                    },
                }
            ],
        }
    ),
    _conversation(
        {
            "surface": "ide",
            "steps": [
                {
                    "tool": "http",
                    "input": {"url": "https://api.example.com/v1/me", "headers": {"Authorization": "Bearer <<jwt>>"}},
                },
                {"tool": "http", "output": {"status": 200, "body": {"email": "<<email>>", "phone": "<<phone_us>>"}}},
                {
                    "tool": "fs.read",
                    "input": {"path": "<<home_mac>>/project/.env"},
                    "output": "SLACK_WEBHOOK=<<slack_webhook>>",
                },
            ],
        }
    ),
]


# --- the clean corpus -------------------------------------------------------------
# Ordinary code and prose: nothing here may be replaced.

CLEAN: list[str] = [
    # Python
    "def embed_texts(texts: list[str], *, batch_size: int = 64) -> np.ndarray:\n    return model.encode(texts, batch_size=batch_size)",
    'tokenizer = AutoTokenizer.from_pretrained("sentence-transformers/all-MiniLM-L6-v2")\n'
    'inputs = tokenizer(texts, max_length=256, padding=True, truncation=True, return_tensors="pt")',
    'response = client.chat.completions.create(model="gpt-4o-mini", messages=messages, max_tokens=512, temperature=0.2)',
    "tokenizer.pad_token = tokenizer.eos_token\nmodel.config.pad_token_id = tokenizer.pad_token_id",
    '{"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>", "model_max_length": 512}',
    "usage = {'prompt_tokens': 1432, 'completion_tokens': 211, 'total_tokens': 1643}",
    "tokens_per_second: 1400\nmax_new_tokens: 256\nnum_beams: 4",
    "def login(request, username: str, password: str) -> bool:\n    user = authenticate(request, username=username, password=password)\n    return user is not None",
    'password = form.cleaned_data["password"]\nif not check_password(password, user.password):\n    raise ValidationError("wrong password")',
    'AUTH_PASSWORD_VALIDATORS = [\n    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},\n]',
    'SECRET_KEY = env("SECRET_KEY")\nDEBUG = env.bool("DEBUG", default=False)',
    "api_key: Optional[str] = None\ntoken: str\ntimeout: float = 30.0",
    'class Settings(BaseSettings):\n    api_key: SecretStr = Field(..., alias="OPENAI_API_KEY")\n    password: SecretStr',
    'token = os.environ["GITHUB_TOKEN"]\nheaders = {"Authorization": f"Bearer {token}"}',
    "client_secret=settings.OAUTH_CLIENT_SECRET,\naccess_token=self.access_token,",
    'hf_token = os.getenv("HF_TOKEN")\nfrom huggingface_hub import hf_hub_download',
    'secret = secrets.token_urlsafe(32)\nreturn f"whsec_{base64.b64encode(raw).decode()}"',
    "for i, token in enumerate(tokens):\n    if token == tokenizer.sep_token:\n        break",
    "x = np.zeros((32, 128, 768), dtype=np.float32)\nassert x.shape == (32, 128, 768)",
    '@pytest.mark.parametrize("n", [1, 2, 3])\ndef test_it_rejects_a_stale_timestamp(n):\n    assert n > 0',
    "@dataclass(frozen=True)\nclass Pattern:\n    name: str\n    regex: str",
    'raise ValueError(f"custom pattern {name!r}: not a valid regular expression")',
    'logger.info("embedded %d texts in %.2fs", len(texts), elapsed)',
    "if password_min_length > 0 and len(password) < password_min_length: return False",
    "compass_heading = 270\nbypass_cache = True\npassenger_count = 3",
    'async def handler(event, context):\n    token = event.get("token")\n    return {"statusCode": 200}',
    'result = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True)',
    "x = tmp0[1::2] << 4 | tmp0[0::2]\nw[1::2] = 1\nX = data[::5, ::2]",
    "self.samples_per_token = samples_per_token\nsemantic_infer_token=129_599,\nself.blank_token = blank_token",
    'INTERNAL_RESET_SESSION_TOKEN = "_password_reset_token"\nreset_url_token = "set-password"',
    # TypeScript
    "const token = await getToken();\nconst res = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });",
    "interface LoginForm {\n  email: string;\n  password: string;\n  remember?: boolean;\n}",
    'export const API_URL = process.env.NEXT_PUBLIC_API_URL ?? "http://localhost:3000";',
    'import type { Request } from "express";\nimport { z } from "zod";\nconst schema = z.object({ apiKey: z.string().min(20) });',
    'const [password, setPassword] = useState<string>("");\nsetPassword(e.target.value);',
    '<img src="/static/icon@2x.png" srcset="/static/icon@3x.png 3x" alt="logo">',
    '"dependencies": { "@types/node": "^20.11.5", "lodash": "4.17.21", "htmx.org": "2.0.4" }',
    "npm install lodash@4.17.21 @tanstack/react-query@5.40.0",
    ".button { color: #1f2937; background: #f9fafb; border: 1px solid #e5e7eb; }",
    "const { username, password } = credentials || { username: void 0, password: void 0 };",
    "const lastProp = anchor2 && tagToken ? anchor2.offset > tagToken.offset ? anchor2 : tagToken : anchor2 ?? tagToken;",
    'debug("pw:adb:send")(data.toString().substring(0, 100));\nprogressToken: messageId',
    # Go
    'token := os.Getenv("GITHUB_TOKEN")\nif token == "" {\n\treturn errors.New("GITHUB_TOKEN is not set")\n}',
    'password := r.FormValue("password")\nhash, err := bcrypt.GenerateFromPassword([]byte(password), 12)',
    'srv := &http.Server{Addr: ":8080", ReadTimeout: 5 * time.Second}\nlog.Fatal(srv.ListenAndServe())',
    "func (s *Store) Get(ctx context.Context, id uuid.UUID) (*Item, error) {",
    # Rust / C++
    "let map: HashMap<String, Vec<u8>> = HashMap::new();\nstd::fs::read_to_string(path)?;",
    "std::vector<int> v{1, 2, 3};\nauto it = std::find(v.begin(), v.end(), 2);",
    "impl fmt::Display for Error { fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result { Ok(()) } }",
    # Hashes, ids, versions, dates, numbers
    "commit 3f2a9c1b7d4e5f60718293a4b5c6d7e8f9012345\nAuthor: CI Bot\nDate:   Tue Jun 11 09:14:03 2024 +0200",
    "Merge pull request #4821 from acme/fix-flaky-test (a1b2c3d)",
    "item 7f3e9b2a-1c4d-4e5f-8a6b-9c0d1e2f3a4b was assigned to category 12",
    "request_id=550e8400-e29b-41d4-a716-446655440000 trace_id=4bf92f3577b34da6a3ce929d0e0e4736",
    "Upgraded Django from 5.2.18 to 5.2.19, celery 5.7.0, numpy==2.4.6, torch>=2.3.0,<3",
    "Released v1.2.3 (build 1.2.3-rc.1+sha.5114f85); see CHANGELOG for 1.2.0…1.2.3",
    'Chrome/120.0.0.0 Safari/537.36 on Windows NT 10.0; AssemblyVersion("1.0.0.0")',
    "OID 1.3.6.1.4.1.311.21.7 is the certificate template extension",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "FROM python:3.11-slim@sha256:2b6e8c2f0a9d5c7b1e4f3a6d8c9b0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d",
    "Dates: 2024-03-15, 15/03/2024, 03/15/2024, 15.03.2024 and 2024-06-11T09:14:03.512Z",
    "started 10:22:33, finished 10:24:01 (+02:00), cron 0 3 * * *",
    "epoch 1718096043, elapsed 1.734s, p99 412 ms, 1,234,567 rows, $1,299.00",
    "Throughput went up +15% (from 1,150/s to 1,320/s); latency -8%.",
    "@@ -12,7 +12,9 @@ def scrub(text):\n-    return text\n+    return _apply(text)",
    "src/feedback/services.py:88:17: E501 line too long (121 > 100 characters)",
    "  at Object.<anonymous> (/app/src/index.ts:42:13)\n  at Module._compile (node:internal/modules/cjs/loader:1376:14)",
    'File "/usr/lib/python3.11/asyncio/base_events.py", line 653, in run_until_complete',
    'File "/app/feedback/tasks.py", line 27, in embed_item',
    "batch sizes 128 256 1024 and 2048 gave 330, 410, 455 and 460 texts/s",
    "order ORD-2024-000123 shipped; invoice 2024/06/0042; ticket JIRA-4411",
    "matrix of 3x3, learning rate 3e-4, weight decay 1e+10? no, 1e-2",
    "coordinates 52.5200, 13.4050 (Berlin); temperature 21.5 °C",
    "ISBN 978-3-16-148410-0 and ISSN 2049-3630",
    "build 20240611.3 on runner ubuntu-22.04, job 8812 of 9000",
    "the model scored 79.4 NMI on banking77 vs 79.5 for fp32",
    "0x7ffd5e8c3a10 0xdeadbeef 0o755 0b1010",
    # Base64 fixtures and encoded data
    'fixture = base64.b64decode("aGVsbG8gd29ybGQ=")\nassert fixture == b"hello world"',
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    "header = 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9'  # just the JOSE header, no token",
    "webhook-signature: v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=",
    # URLs and hosts without credentials
    "See https://docs.djangoproject.com/en/5.2/ref/settings/#std-setting-SECRET_KEY and https://example.com/home/about",
    "open http://localhost:8000/review/?page=2&sort=-received_at or http://127.0.0.1:8000/admin/",
    "gunicorn -b 0.0.0.0:8000 config.wsgi; redis://localhost:6379/0; postgres://localhost:5432/feedback",
    "listen [::1]:8080 and ::ffff:0:0 is unspecified-ish; 255.255.255.0 is the netmask",
    "git clone git@github.com:acme/feedback-app.git && cd feedback-app",
    "https://github.com/acme/app/blob/main/feedback/scrubber.py#L120-L140",
    "https://api.example.com/Users/123/profile?include=teams",
    "dig @8.8.8.8 example.com; nslookup example.com 1.1.1.1",
    # Prose: dogfooding reports and comments without personal data
    "The agent edited the wrong file: it changed tests/test_views.py instead of feedback/views.py.",
    "It ran the tests but claimed success although 3 of 41 failed.",
    "Asks for clarification too often; I had to answer 5 questions before it started.",
    'Special-cased the test to pass: `if os.environ.get("CI"): return expected`.',
    "The password reset flow is broken: the token in the e-mail expires after 10 minutes instead of 24 hours.",
    "Set the OPENAI_API_KEY environment variable before running the evals; never commit it.",
    "Use a bearer token in the Authorization header; see the API docs for the scopes.",
    "Reviewers: please label the 120 items in the queue by Friday, 14 June.",
    "Call the helper with retries=3 and backoff=0.5; phone numbers are stored hashed.",
    "Our secret sauce is the held-out eval set; nothing nearly identical may reach training.",
    "The passphrase field is optional; the API key field is required.",
    "password: must be at least 12 characters and not in the breach list",
    "Fixed in 2.0.1 — the cache key now includes the model version (see #4821).",
    "Version 4.0.30319.42000 of the runtime and build 10.0.19045.4529 of Windows.",
    "Moved the home page to /home and the user list to /users/ in the router.",
    "Ran on /tmp/hs with DATA_DIR set; logs in /var/log/app and config in /etc/app.",
    "Thanks! 👍 Works now.",
]
