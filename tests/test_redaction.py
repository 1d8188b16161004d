"""Secret redaction: the common credential forms, key blocks across messages, properties."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memmw import redaction
from memmw.redaction import (
    REDACTED,
    RedactingFilter,
    StreamRedactor,
    dsn_is_ambiguous,
    mask_dsn,
    redact_all,
    redact_error,
    redact_secrets,
)

PEM_BODY = [
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK",
    "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo",
]
PEM = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\n-----END RSA PRIVATE KEY-----"
PGP = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF5x2yEBCADP0pQ7cXk9aB3sT1u8qPzv\n"
    "=Ab12\n-----END PGP PRIVATE KEY BLOCK-----"
)

#: The 20 forms of issue 9 (9 of them leaked before) plus more common credential shapes.
#: (name, text, secret that must disappear)
FORMS = [
    ("prose-password", "btw my password is Tr0ub4dor&3 for the NAS", "Tr0ub4dor&3"),
    ("prose-password-for", "the password for the wifi is kiwi-banana-42", "kiwi-banana-42"),
    ("passphrase", "passphrase: correct horse battery staple", "correct horse battery staple"),
    ("aws-secret-prose", "my aws secret is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY ok",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("short-sk", "try sk-abc123def456 now", "sk-abc123def456"),
    ("pgp-block", f"here it is\n{PGP}\nthanks", "lQOYBF5x2yEBCADP0pQ7cXk9aB3sT1u8qPzv"),
    ("pem-block", f"key:\n{PEM}", PEM_BODY[1]),
    ("azure-account-key",
     "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==;"
     "EndpointSuffix=core.windows.net", "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA=="),
    ("slack-webhook",
     "post to https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
     "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"),
    ("pin", "my PIN is 4821", "4821"),
    ("pin-code-for", "the pin code for the door is 90 21", "90 21"),
    ("openai", "use sk-proj-Abcdefghijklmnopqrstuvwx0123456789 please", "Abcdefghijklmnop"),
    ("anthropic", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345 is mine", "abcdefghijklmnop"),
    ("google", "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI ok", "AIzaSyDdI0hCZtE6vySjMm"),
    ("github", "ghp_abcdefghijklmnopqrstuvwxyz0123456789 here", "ghp_abcdefghij"),
    ("aws-id", "AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("bearer", "Authorization: Bearer abcdef.ghijkl-123456", "abcdef.ghijkl-123456"),
    ("url-password", "postgres://admin:s3cr3tpass@db.local/prod", "s3cr3tpass"),
    ("slack-token", "xoxb-123456789012-abcdefghijkl", "xoxb-123456789012"),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
     "dozjgNryP4J3jVmNHl0w5N"),
    ("stripe", "sk_live_51H8abcdefghijklmnopqrstuv", "51H8abcdefghijklmnop"),
    ("sendgrid", "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDE",
     "abcdefghijklmnopqrstuvwxyz0123456789"),
    ("gitlab", "glpat-abcdefghij0123456789", "glpat-abcdefghij0123456789"),
    ("npm", "npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm_abcdefghijklmnop"),
    ("hf", "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "hf_abcdefghijklmnop"),
    ("conn-string-password", "Server=db;User Id=sa;Password=P@ssw0rd!;", "P@ssw0rd!"),
    ("env-assignment", "export DATABASE_PASSWORD='pa55w0rd-x'", "pa55w0rd-x"),
    ("json", '{"client_secret": "abcd-efgh-1234"}', "abcd-efgh-1234"),
    ("seed-phrase", "my seed phrase is abandon ability able about above absent",
     "abandon ability able"),
    ("openssh", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n"
     "-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU"),
]


@pytest.mark.parametrize(("name", "text", "secret"), FORMS, ids=[f[0] for f in FORMS])
def test_common_secret_forms_are_redacted(name: str, text: str, secret: str) -> None:
    out = redact_secrets(text)
    assert secret not in out, out
    assert REDACTED in out


@pytest.mark.parametrize(("name", "text", "secret"), FORMS, ids=[f[0] for f in FORMS])
def test_built_in_rules_hold_without_detect_secrets(
    monkeypatch: pytest.MonkeyPatch, name: str, text: str, secret: str
) -> None:
    # detect-secrets is an optional extra: every form above must hold without it.
    monkeypatch.setattr(redaction, "_detect", redaction._DetectSecrets(loaded=True))
    assert secret not in redact_secrets(text)


#: Key and token shapes the transcript source has redacted since the first version.
BASIC_FORMS = [
    ("openai", "use sk-proj-Abcdefghijklmnopqrstuvwx0123456789 please",
     "sk-proj-Abcdefghijklmnopqrstuvwx0123456789"),
    ("openai-legacy", "key sk-Abcdefghijklmnopqrstuvwx01234567", "sk-Abcdefghijklmnopqrstuvwx0"),
    ("anthropic", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345 is mine", "sk-ant-api03"),
    ("google", "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI ok", "AIzaSyDdI0hCZtE6vySjMm"),
    ("github", "ghp_abcdefghijklmnopqrstuvwxyz0123456789 here", "ghp_abcdefghij"),
    ("github-pat", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCD",
     "github_pat_11ABCDEFG"),
    ("aws-id", "AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("aws-secret", "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "wJalrXUtnFEMI"),
    ("bearer", "curl -H 'Authorization: Bearer eyJhbGciOi.abc-def_123' x", "eyJhbGciOi.abc"),
    ("assignment", "OPENAI_API_KEY=abc123def456", "abc123def456"),
    ("quoted", 'config {"api_key": "zz-top-secret-9"}', "zz-top-secret-9"),
    ("password", "my password: hunter2!", "hunter2!"),
    ("url", "postgres://admin:s3cr3tpass@db.local/prod", "s3cr3tpass"),
    ("slack", "xoxb-123456789012-abcdefghijkl", "xoxb-123456789012"),
]


@pytest.mark.parametrize(("name", "text", "secret"), BASIC_FORMS, ids=[s[0] for s in BASIC_FORMS])
def test_basic_key_and_token_forms_are_redacted(name: str, text: str, secret: str) -> None:
    out = redact_secrets(text)
    assert secret not in out
    assert REDACTED in out


@pytest.mark.parametrize(
    "text",
    [
        "the gateway runs on port 8080",
        "max_tokens=4000 and 400 tokens per chunk",
        "the author: Jane Austen",
        "Bearer of bad news",
        "ask the skeptic about sk-8",
        "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it",
        "we reset the password yesterday",
        "pin the version to 3",
        "the design: modern and calm",
    ],
)
def test_ordinary_text_is_kept(text: str) -> None:
    assert redact_secrets(text) == text


def test_pem_split_over_two_messages_is_hidden_whole() -> None:
    first = "here is the key -----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY[0]
    second = "\n".join(PEM_BODY[1:]) + "\n-----END RSA PRIVATE KEY----- and that's all"
    out = redact_all(["hello", first, second, "later: no secret here"])
    joined = "\n".join(out)
    assert not any(line in joined for line in PEM_BODY)
    assert out[0] == "hello" and out[1].startswith("here is the key")
    assert out[2].endswith("and that's all") and out[3] == "later: no secret here"


def test_key_tail_without_its_begin_is_hidden() -> None:
    tail = "\n".join(PEM_BODY) + "\n-----END PRIVATE KEY-----\nthanks"
    out = redact_secrets(tail)
    assert not any(line in out for line in PEM_BODY) and out.endswith("thanks")


def test_stream_redactor_hides_everything_until_the_end_marker() -> None:
    stream = StreamRedactor()
    assert stream.redact("-----BEGIN PRIVATE KEY-----") == REDACTED
    assert stream.redact(PEM_BODY[0]) == REDACTED and stream.in_block
    assert stream.redact("-----END PRIVATE KEY----- ok") == f"{REDACTED} ok"
    assert not stream.in_block


def test_log_filter_redacts_message_arguments_and_tracebacks() -> None:
    record = logging.LogRecord(
        "memmw.x", logging.WARNING, __file__, 1, "provider said %s", ("bad key sk-abc123def456",),
        None,
    )
    try:
        raise RuntimeError("echo: Authorization: Bearer abcdefgh12345678")
    except RuntimeError as exc:
        record.exc_info = (type(exc), exc, exc.__traceback__)
    assert RedactingFilter().filter(record)
    assert "sk-abc123def456" not in record.getMessage()
    assert record.exc_text is not None and "abcdefgh12345678" not in record.exc_text


# -- properties --------------------------------------------------------------------------

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
SECRETS = st.one_of(
    st.text(_ALNUM, min_size=24, max_size=48).map(lambda s: "sk-proj-" + s),
    st.text(_ALNUM, min_size=20, max_size=48).map(lambda s: "sk-" + s),
    st.text(_ALNUM, min_size=36, max_size=36).map(lambda s: "ghp_" + s),
    st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16).map(lambda s: "AKIA" + s),
    st.text(_ALNUM + "-_", min_size=35, max_size=35).map(lambda s: "AIza" + s),
    st.text(_ALNUM, min_size=16, max_size=32).map(lambda s: "sk_live_" + s),
    st.text(_ALNUM, min_size=20, max_size=30).map(lambda s: "glpat-" + s),
)
PROSE = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=80
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(prefix=PROSE, secret=SECRETS, suffix=PROSE)
def test_a_token_never_survives_whatever_surrounds_it(prefix: str, secret: str, suffix: str) -> None:
    out = redact_secrets(f"{prefix} {secret} {suffix}")
    assert secret not in out


@settings(max_examples=300)
@given(text=PROSE)
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_secrets(text)
    assert redact_secrets(once) == once


@settings(max_examples=200)
@given(
    password=st.text(_ALNUM + "!@#$%^&*-_", min_size=4, max_size=24),
    lead=st.sampled_from(["my password is", "password:", "the passcode was", "pwd ="]),
)
def test_passwords_in_prose_are_hidden(password: str, lead: str) -> None:
    assume(password not in f"fyi {lead} {REDACTED}")  # "pass" is in "password" itself
    out = redact_secrets(f"fyi {lead} {password}")
    assert password not in out


@settings(max_examples=150)
@given(cut=st.integers(min_value=0, max_value=len(PEM)), before=PROSE, after=PROSE)
def test_a_key_split_anywhere_across_two_messages_never_leaks(
    cut: int, before: str, after: str
) -> None:
    assume("-----" not in before + after)
    out = "\n".join(redact_all([before + " " + PEM[:cut], PEM[cut:] + " " + after]))
    for line in PEM_BODY:
        # A fragment left in one message is at most the part the cut split off; a full
        # body line never survives.
        assert line not in out


@settings(max_examples=200)
@given(words=st.lists(st.sampled_from(
    ["the", "gateway", "runs", "on", "port", "memory", "note", "agent", "search", "index",
     "2026", "meeting", "Paris", "config", "tokens", "chunk", "file", "with", "and", "a"]
), max_size=30))
def test_plain_notes_are_left_alone(words: list[str]) -> None:
    text = " ".join(words)
    assert redact_secrets(text) == text



# -- issue 20: every form people paste, in every language ---------------------------------

#: The credential corpus shared with ``benchmarks/edges.py --only redact``.
CORPUS = json.loads(
    (Path(__file__).resolve().parents[1] / "benchmarks" / "credential_forms.json").read_text(
        encoding="utf-8"
    )
)


@pytest.mark.parametrize("form", CORPUS, ids=[f["name"] for f in CORPUS])
def test_every_credential_form_of_the_corpus_is_redacted(
    monkeypatch: pytest.MonkeyPatch, form: dict[str, str]
) -> None:
    # Built-in rules alone (detect-secrets is an optional extra), then with it if present.
    monkeypatch.setattr(redaction, "_detect", redaction._DetectSecrets(loaded=True))
    assert form["secret"] not in redact_secrets(form["text"])
    monkeypatch.setattr(redaction, "_detect", redaction._DetectSecrets())
    out = redact_secrets(form["text"])
    assert form["secret"] not in out and REDACTED in out


@pytest.mark.parametrize(
    "text",
    [
        "we reset the password yesterday",
        "password reset link sent",
        "I forgot my Passwort yesterday",
        "Das Passwort muss 12 Zeichen haben",
        "passwordless login",
        "bypass: true",
        "the compass=north",
        "find . -name x -print",
        "mkdir -p /tmp/x",
        "ssh -p 22 host",
        "docker run -p 8080:80 nginx",
        "psql --no-password -h db -U app",
        "memmw search --max-tokens 400 harbour",
        "https://example.com:8080/x?email=a@b.com",
        "https://medium.com/@author/post",
        "git clone git@github.com:org/repo.git",
        "cookies are in the jar",
        "Session ID: 6a1f",
        "我们明天开会",
        "パスワードを忘れた",
    ],
)
def test_ordinary_text_about_passwords_is_kept(text: str) -> None:
    assert redact_secrets(text) == text


#: A made-up password: letters, at least one digit, some signs people use.
MADE_UP = st.builds(
    lambda head, digit, tail: head + digit + tail,
    st.text("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ", min_size=3, max_size=12),
    st.sampled_from("23456789"),
    st.text("abcdefghjkmnpqrstuvwxyz23456789!#%*+-_", max_size=10),
)
#: Where people write a password: {} is the password.
TEMPLATES = [
    "DB_PASSWORD={}", "export AWS_SECRET_ACCESS_KEY={}", "export API_TOKEN='{}'",
    'SECRET_KEY="{}"', "password: {}", '{{"password": "{}"}}', "  secret: {}",
    "curl -u alice:{} https://api.example.com", "curl --user bob:{} https://x.example",
    "mysql -u root -p'{}' prod", "mysql -uroot -p{} prod", "psql --password={} -h db",
    "sshpass -p '{}' ssh root@host", "docker login -u bob -p {} registry.io",
    "machine api.example.com login bob password {}", "https://x.example/v1?token={}&a=1",
    "https://bob:{}@example.com/x", "postgresql://app:{}@db:5432/prod",
    "Authorization: Basic {}", "my password is {}", "the password for the NAS is {}",
    "Passwort: {}", "mein Passwort ist {}", "Das Kennwort lautet {}", "mot de passe : {}",
    "mon mot de passe est {}", "contraseña {}", "mi contraseña es {}", "minha senha é {}",
    "la mia password è {}", "mijn wachtwoord is {}", "moje hasło to {}", "şifrem: {}",
    "пароль {}", "мой пароль: {}", "我的密码是{}", "密码：{}", "パスワードは{}です",
    "パスワード: {}", "비밀번호는 {} 입니다", "mật khẩu là {}", "lösenordet är {}",
    "ssh root@10.0.0.5, password {}", "the PIN code for the door is 4821 and pw {}",
]
LINE_PROSE = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Zl", "Zp", "Cc")), max_size=40
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    template=st.sampled_from(TEMPLATES), password=MADE_UP, before=LINE_PROSE, after=LINE_PROSE
)
def test_a_generated_password_in_any_form_never_survives(
    template: str, password: str, before: str, after: str
) -> None:
    out = redact_secrets(f"{before}\n{template.format(password)}\n{after}")
    assert password not in out


#: Words of the sample workspaces: generated "ordinary notes" are recombinations of them.
_SAMPLES = Path(__file__).resolve().parents[1]
_VOCABULARY = sorted(
    {
        word
        for folder in ("examples/workspace", "benchmarks/facts/workspace")
        for path in (_SAMPLES / folder).rglob("*.md")
        for word in path.read_text(encoding="utf-8").split()
    }
)


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.sampled_from(_VOCABULARY), max_size=40))
def test_notes_made_of_the_sample_workspaces_words_are_not_mangled(words: list[str]) -> None:
    text = " ".join(words)
    assert redact_secrets(text) == text


# -- DSNs: one masking function, whatever the password holds ------------------------------

PASSWORDS = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\ue000"),
    max_size=24,
)
USERS = st.text("abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=10)


def _dsn_forms(user: str, password: str) -> list[str]:
    """The ways a DSN carries ``password``: raw and percent-encoded URLs, key=value."""
    escaped = password.replace("\\", "\\\\").replace("'", "\\'")
    forms = [
        f"postgresql://{user}:{quote(password, safe='')}@db.example:5432/mem?sslmode=require",
        f"host=db.example port=5432 user={user} password='{escaped}' dbname=mem",
    ]
    if not any(c.isspace() for c in password):  # a raw URL cannot hold whitespace
        forms.append(f"postgresql://{user}:{password}@db.example:5432/mem")
        forms.append(f"postgres://{user}:{password}@db.example/mem")
    return forms


@settings(max_examples=300, deadline=None)
@given(user=USERS, password=PASSWORDS, other=PASSWORDS)
def test_a_masked_dsn_does_not_depend_on_the_password(
    user: str, password: str, other: str
) -> None:
    # The strongest form of "never shows the password": two DSNs that differ only in
    # their password mask to the same text (and the user, host and database stay).
    forms = zip(_dsn_forms(user, password), _dsn_forms(user, other), _dsn_forms(user, ""),
                strict=False)
    for mine, theirs, empty in forms:
        assert mask_dsn(mine) == mask_dsn(theirs), (mine, theirs)
        shown = mask_dsn(mine) or ""
        assert "db.example" in shown and user in shown
        assert shown == mask_dsn(empty)  # carries nothing of the password
        if password not in shown.replace(REDACTED, ""):
            continue
        assert password in (mask_dsn(empty) or "").replace(REDACTED, "")  # the fixed text


@settings(max_examples=300, deadline=None)
@given(user=USERS, password=PASSWORDS.filter(lambda p: len(p) >= 1), noise=LINE_PROSE)
def test_connection_errors_never_show_the_password(user: str, password: str, noise: str) -> None:
    from urllib.parse import unquote

    for dsn in _dsn_forms(user, password):
        # A driver that echoes the password, raw or decoded, inside its message.
        encoded = quote(password, safe="")
        text = f'{noise} invalid token "{encoded}" near "{unquote(encoded)}": {password} {noise}'
        out = redact_error(text, dsn=dsn)
        assume(password not in f'{noise} invalid token "{REDACTED}" near "": {noise}')
        assert password not in out, (dsn, out)


def test_dsn_with_a_raw_at_or_slash_in_its_password_is_flagged() -> None:
    assert dsn_is_ambiguous("postgresql://bob:p@ss@db/x")
    assert dsn_is_ambiguous("postgresql://bob:pa/ss@db/x")
    assert not dsn_is_ambiguous("postgresql://bob:p%40ss@db/x")
    assert not dsn_is_ambiguous("host=db password=p@ss/x dbname=x")
    assert mask_dsn("postgresql://bob:p@ss@db:5432/x") == f"postgresql://bob:{REDACTED}@db:5432/x"
    assert mask_dsn("postgresql://bob@db/x") == "postgresql://bob@db/x"
    # libpq reads "dbname=x" as the password here: masked too.
    assert mask_dsn("host=db password= dbname=x") == f"host=db password= {REDACTED}"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # A path normaliser folds "//": the tool error echoes "https:/user:pw@host".
        ("https:/bob:pa55word@example.com/x: not a memory file", "pa55word"),
        ("https:/hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX: bad", "XXXXXXXXXXXX"),
        # "hasło to X: ..." reads as "password to <thing>:" and as "password is X".
        ("moje hasło to kotek12: not a memory file", "kotek12"),
    ],
)
def test_echoed_forms_of_a_credential_are_redacted(text: str, secret: str) -> None:
    """Issue 20: a tool error echoes what the user pasted in a changed form."""
    assert secret not in redact_secrets(text)


def test_json_values_are_judged_with_their_key() -> None:
    from memmw.redaction import redact_json

    record = {"content": '{"password": "jsonpw123"}', "args": {"password": "jsonpw123"}}
    assert "jsonpw123" not in json.dumps(redact_json(record))
    assert redact_json({"path": "MEMORY.md", "n": 3}) == {"path": "MEMORY.md", "n": 3}
