"""Fake secrets with the shapes of real ones, in the sentences they turn up in (tests/test_secrets.py).

None is a real key: each is made up, and written in two pieces so that no scanner
takes this file for a leak. `(label, text, secret)`: `secret` must never be stored
when `text` is given to memctl; `label` names the case in a failing test.
"""

from __future__ import annotations

ANTHROPIC = "sk-ant-api03-" + "Xq7vR2mK9pL4wN8tZ3bY6cH1dF5gJ0aS-eU2iO7kQ4rT9yW3xV6nM1bC8zA5sD0fG2hJ4kL7pQ-9wE3rTAA"
OPENAI_PROJECT = "sk-proj-" + "Zt4Yq8Wm2Np6Lk0Jh3Gf7Ds1Az5Xc9Vb-Tr2Ey6Ui0Op4As8Df1Gh5Jk9LzXcVbNm3Qw7ErTy"
OPENAI_LEGACY = "sk-" + "Ab3Cd5Ef7Gh9Ij1Kl2MnT3BlbkFJOp4Qr6St8Uv0Wx2Yz4Ab"
GITHUB_PAT = "github_pat_" + "11ABCDE2F0q7Rk3Lm9Wn_Zt4Yq8Wm2Np6Lk0Jh3Gf7Ds1Az5Xc9Vb2Tr6Ey0Ui4Op8As3Df7Gh1Jk5Lz9"
GITHUB_CLASSIC = "ghp_" + "R8kd93LmQ2xVn7Ws0Pa4Zt6Yb1Hc5Jf3Ge9D"
GITHUB_OAUTH = "gho_" + "Lm4Wn8Tz3Vb6Xc9Rk2Pq7Ys1Ad5Fg0Hj3Kl6"
GITLAB = "glpat-" + "x7Rk2Pq9Lm4Wn8Tz3Vb6"
GOOGLE = "AIza" + "SyD4f8Gh2Jk6Lm0Np4Qr8St2Uv6Wx0Yz3Ab"
HUGGING_FACE = "hf_" + "kQ7wE2rT9yU4iO1pA6sD3fG8hJ5kL0zXcV"
AWS_ID = "AKIA" + "Z7Q2M4N8P1R6T3V5"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYzq8Hd0Lk3N"
SLACK_BOT = "xoxb-" + "482916305712-593017264813-Qw8Er7Ty6Ui5Op4As3Df2Gh1"
SLACK_HOOK = "https://hooks.slack.com/services/" + "T0A1B2C3D/B4E5F6G7H/Xy8Zq2Wm4Np6Lk0Jh3Gf7Ds1"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
STRIPE_RESTRICTED = "rk_live_" + "9Zx8Cv7Bn6Mq5Wl4Ek3Rj2Th"
SENDGRID = "SG." + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7O.Pq8Rs9Tu0Vw1Xy2Za3Bc4De5Fg6Hi7Jk8Lm9No0Pq1Rs2T"
TWILIO = "SK" + "0123456789abcdef0123456789abcdef"
NPM = "npm_" + "Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0LzXcVbNm9"
PYPI = "pypi-AgEIcHlwaS5vcmc" + "CJDk0ZTJmMWQ4LWE5YjctNDc2Yy04ZjM1LTEyMzQ1Njc4OWFiYwACKlsz" + "LCJwcm9qZWN0X25hbWUiXQ"
DISCORD = "MTA4NzY1NDMyMTA5ODc2NTQz" + ".GhT2xQ." + "Zt4Yq8Wm2Np6Lk0Jh3Gf7Ds1Az5Xc9Vb"
TELEGRAM = "5829104736:" + "AAH4f8Gh2Jk6Lm0Np4Qr8St2Uv6Wx0Yz3Ab"
JWT_HEAD, JWT_BODY = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9", "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IlRhcm8iLCJpYXQiOjE1MTYyMzkwMjJ9"
JWT_SIGNATURE = "Sf1KxwRJSMeKKF2QT4fwpM" + "eJf36POk6yJV_adQssw5c"
JWT = f"{JWT_HEAD}.{JWT_BODY}.{JWT_SIGNATURE}"
BEARER = "Zt4Yq8Wm2Np6Lk0Jh3Gf" + "7Ds1Az5Xc9Vb"
BASIC = "dXNlcjpTM2NyZXQtcGFzcw" + "=="
KEY_BODY = "MIIEowIBAAKCAQEA7Vq3" + "n9Xb2Lk4Jd8Rw1Zp6Ty0Hs5Mc3Qa"
SSH_BODY = "b3BlbnNzaC1rZXktdjEAAAAA" + "BG5vbmUAAAAEbm9uZQAAAAAAAAAB"
URL_PASSWORD = "Tr0ub4dor" + "-and-3"
PW_JA_1 = "Hik4ri-" + "no-Mori7"
PW_JA_2 = "Sakura" + "#2026xyz"
PW_JA_3 = "tsuki" + "Usagi99"
PW_EN_1 = "Sup3r-" + "s3cret-Pw!"
PW_EN_2 = "hunter" + "2-Blue!"
PW_EN_3 = "c0rrect-" + "Horse"
PW_PWD = "Qz9" + "!xL2m"
SSHPASS = "Kumo" + "-Ame-42"
MYSQL_P = "Db-p4ss" + "Word"
MYSQL_LONG = "Long-" + "Pa55-word"
PG_PASSWORD = "Pg" + "Secret-77"
ENV_DB = "Env-Db-" + "Pw-913"
ENV_STRIPE = "sk_test_" + "51Hc3Kl9Zt4Yq8Wm2Np6Lk0J"
ENV_JWT_SECRET = "9f8e7d6c5b4a" + "30291817161514131211"
API_KEY_JA = "Kp7Qw2" + "Er9Ty4Ui"
TOKEN_JA = "Tk-9s8d7f" + "6g5h4j3k"
AZURE = "AccountKey=" + "Zt4Yq8Wm2Np6Lk0Jh3Gf7Ds1Az5Xc9Vb2Tr6Ey0Ui4Op8As3Df7Gh1Jk5Lz9Xc2Vb6Nm0Qw4Er8Ty2Ui6Op0As4Df8Gh2Jk6Lz0Xc==" 
MAILCHIMP = "0f1e2d3c4b5a69788796a5b4c3d2e1f0" + "-us14"
SQUARE = "sq0csp-" + "Zt4Yq8Wm2Np6Lk0Jh3Gf7Ds1Az5Xc9Vb2Tr6Ey0Ui4O"

FAKES: list[tuple[str, str, str]] = [
    ("anthropic", f"ANTHROPIC_KEY は {ANTHROPIC} を使ってください", ANTHROPIC),
    ("anthropic-prose", f"the Claude key {ANTHROPIC} works now", ANTHROPIC),
    ("openai-project", f"OpenAI: {OPENAI_PROJECT}", OPENAI_PROJECT),
    ("openai-legacy", f"old key {OPENAI_LEGACY} still set", OPENAI_LEGACY),
    ("github-fine-grained", f"GitHubのトークン {GITHUB_PAT} で push した", GITHUB_PAT),
    ("github-classic", f"use {GITHUB_CLASSIC} for the GitHub API", GITHUB_CLASSIC),
    ("github-oauth", f"gh auth shows {GITHUB_OAUTH}", GITHUB_OAUTH),
    ("gitlab", f"and {GITLAB} for GitLab", GITLAB),
    ("google", f"Maps の鍵: {GOOGLE}", GOOGLE),
    ("hugging-face", f"HF: {HUGGING_FACE} (read)", HUGGING_FACE),
    ("aws-id", f"AWSの鍵は {AWS_ID} です", AWS_ID),
    ("aws-secret", f'aws_secret_access_key = "{AWS_SECRET}"', AWS_SECRET),
    ("slack-bot", f"Slack bot token {SLACK_BOT} の件", SLACK_BOT),
    ("slack-webhook", f"通知先 {SLACK_HOOK}", SLACK_HOOK),
    ("stripe", f"本番の Stripe は {STRIPE}", STRIPE),
    ("stripe-restricted", f"restricted: {STRIPE_RESTRICTED}", STRIPE_RESTRICTED),
    ("sendgrid", f"mail via {SENDGRID}", SENDGRID),
    ("twilio", f"Twilio API key {TWILIO}", TWILIO),
    ("npm", f"npm publish with {NPM}", NPM),
    ("pypi", f"twine upload -p {PYPI}", PYPI),
    ("discord", f"Discord bot: {DISCORD}", DISCORD),
    ("telegram", f"telegram bot {TELEGRAM} を登録", TELEGRAM),
    ("jwt", f"the session cookie was {JWT} until logout", JWT_SIGNATURE),
    ("jwt-body", f"トークン本体 {JWT}", JWT_BODY),
    ("bearer", f'curl -H "Authorization: Bearer {BEARER}" https://api.example.com/v1', BEARER),
    ("bearer-plain", f"then send bearer {BEARER} again", BEARER),
    ("basic", f"Authorization: Basic {BASIC}", BASIC),
    ("private-key", f"deploy key:\n-----BEGIN RSA PRIVATE KEY-----\n{KEY_BODY}\n-----END RSA PRIVATE KEY-----\nthanks", KEY_BODY),
    ("openssh-key", f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SSH_BODY}\n-----END OPENSSH PRIVATE KEY-----", SSH_BODY),
    ("url-password", f"DATABASE_URL は postgres://app:{URL_PASSWORD}@db.internal:5432/shop です", URL_PASSWORD),
    ("password-ja-wa", f"本番DBのパスワードは {PW_JA_1} です", PW_JA_1),
    ("password-ja-colon", f"管理画面 パスワード：{PW_JA_2}", PW_JA_2),
    ("password-ja-nospace", f"Wi-Fiのパスワードは{PW_JA_3}だよ", PW_JA_3),
    ("password-en-colon", f"password: {PW_EN_1}", PW_EN_1),
    ("password-en-is", f"The admin password is {PW_EN_2} for now", PW_EN_2),
    ("password-en-was", f"my password was {PW_EN_3}.", PW_EN_3),
    ("pwd", f"connect with user=app pwd={PW_PWD} host=db", PW_PWD),
    ("sshpass", f"sshpass -p '{SSHPASS}' ssh deploy@web1", SSHPASS),
    ("mysql-p", f"mysql -u root -p{MYSQL_P} shop < dump.sql", MYSQL_P),
    ("mysql-password", f"mysqldump --user=root --password={MYSQL_LONG} shop", MYSQL_LONG),
    ("env-export", f"export PGPASSWORD={PG_PASSWORD}", PG_PASSWORD),
    ("env-block", f"DB_HOST=db.internal\nDB_PASSWORD={ENV_DB}\nDEBUG=1", ENV_DB),
    ("env-stripe", f"STRIPE_SECRET_KEY={ENV_STRIPE}\nPORT=8080", ENV_STRIPE),
    ("env-jwt-secret", f'JWT_SECRET="{ENV_JWT_SECRET}"', ENV_JWT_SECRET),
    ("api-key-ja", f"APIキーは {API_KEY_JA} です", API_KEY_JA),
    ("token-ja", f"アクセストークン：{TOKEN_JA}", TOKEN_JA),
    ("azure", f"DefaultEndpointsProtocol=https;AccountName=shop;{AZURE};EndpointSuffix=core.windows.net", AZURE[len("AccountKey="):]),
    ("mailchimp", f"Mailchimp {MAILCHIMP}", MAILCHIMP),
    ("square", f"Square secret {SQUARE}", SQUARE),
]

# What must stay as written: prose, code, ids and hashes (tests/test_secrets.py).
ORDINARY = [
    "本番デプロイは火曜日 10:00、担当は佐藤さん。ロールバック手順は docs/runbook.md にある。",
    "パスワードは変更しました。次回のログインで新しいものを設定してください。",
    "パスワードのリセット手順を README に書いた",
    "The password is stored in the vault, never in the repo.",
    "Use a password manager; the password field must not be empty.",
    "Reset your password from the account page.",
    "commit 3f2a9c1e0b7d4e5f6a7b8c9d0e1f2a3b4c5d6e7f fixed the flaky test",
    "uuid 123e4567-e89b-12d3-a456-426614174000 is the session",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 matches",
    "def parse(text: str) -> list[str]:\n    return [line.strip() for line in text.splitlines() if line]",
    "for key, value in settings.items(): print(key, value)",
    "the API key rotation runs monthly; tokens expire after 90 days",
    "basic configuration: two workers, one queue",
    "Bearer tokens go in the Authorization header (see RFC 6750)",
    "mysql -u root -p shop < dump.sql",
    "sshpass -p is unsafe; use keys",
    "PORT=8080\nDEBUG=1\nDB_HOST=db.internal\nLOG_LEVEL=info",
    "ep-20260501100000-ab12 record:5d0c6a1e-1111-4a7b-9c1d-000000000001",
    "ファイル memory/decisions/release-cadence.md を更新した",
    "internationalization and localization",
    "https://example.com/docs/guide?page=2#install",
    "git rebase -i HEAD~3 && git push --force-with-lease",
    "The staging password: ask Alice, it is in 1Password",
    "パスワードは1Passwordの共有Vaultにある。",
    "Wi-Fi password: see the sticker under the router, it changes every month",
]
