//! The pinned credential detectors: a declarative table.
//!
//! Each entry is `(marker name, pattern)`. A pattern with a capture group
//! named `s` has only that group replaced (so `password=` and the user of a
//! URL stay readable); otherwise the whole match is. Patterns follow the
//! published formats (largely gitleaks' rules) and are deliberately anchored
//! on fixed prefixes or assignment keys, so ordinary prose never matches.
//!
//! What must stay true: no pattern can match the marker text
//! `[REDACTED:name]` (redaction is idempotent), and every length is bounded
//! so the streaming hold-back in `engine::hooks` ([`MAX_SECRET_BYTES`])
//! covers any token that can be split across two chunks.
//!
//! [`MAX_SECRET_BYTES`]: super::MAX_SECRET_BYTES

/// The detector set's version: bumped with every change to [`DETECTORS`]
/// (a test pins the table's digest to it, so a change without a bump
/// fails). 1: the 42 detectors of the first release; 2: 17 more formats
/// (Groq, xAI, Vault, Terraform Cloud, Grafana, New Relic, Postman,
/// Supabase, Replicate, Perplexity, Heroku, `Authorization: Basic`, a URL
/// with an empty user (`redis://:pass@`), Azure SAS `sig=`, docker
/// `"auth":`, `.netrc` `password`, kubeconfig `client-key-data:`); 3: the
/// controller's tool tickets (`lapis_tkt_…`), which an agent holds in its
/// environment and may print.
#[cfg(test)]
pub(crate) const DETECTOR_SET_VERSION: u32 = 3;

/// `(name, pattern)`, applied in this order (more specific first).
pub(super) const DETECTORS: &[(&str, &str)] = &[
    // Private keys: the whole PEM block, any key type (RSA, EC, OPENSSH, PGP,
    // PKCS#8 as in GCP service-account files); an unterminated block to the
    // end of the text.
    (
        "private-key",
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY( BLOCK)?-----(?s:.)*?(?:-----END[ A-Z0-9]*PRIVATE KEY( BLOCK)?-----|\z)",
    ),
    // The controller's own secrets.
    ("lapis-bearer", r"lapis_s_[0-9a-f]{64}"),
    ("lapis-ticket", r"lapis_tkt_[0-9a-f]{64}"),
    ("lapis-token", r"lapis_[0-9a-f]{64}"),
    // Cloud.
    (
        "aws-access-key-id",
        r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b",
    ),
    (
        "aws-secret-access-key",
        r#"(?i)aws_?(?:secret)?_?(?:access)?_?key["']?\s*[:=]\s*["']?(?P<s>[A-Za-z0-9/+]{40})\b"#,
    ),
    ("gcp-api-key", r"\bAIza[0-9A-Za-z_-]{35}\b"),
    ("gcp-oauth-secret", r"\bGOCSPX-[A-Za-z0-9_-]{28}\b"),
    ("gcp-access-token", r"\bya29\.[0-9A-Za-z_-]{20,512}"),
    (
        "azure-storage-key",
        r"(?i)AccountKey=(?P<s>[A-Za-z0-9+/]{86}==)",
    ),
    (
        "azure-client-secret",
        r"(?:[A-Za-z0-9_~.]{0,3}[0-9])?Q~[A-Za-z0-9_~.-]{31,34}\b",
    ),
    ("digitalocean-token", r"\bdo[por]_v1_[a-f0-9]{64}\b"),
    (
        "age-secret-key",
        r"\bAGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}\b",
    ),
    // Version control.
    ("github-token", r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b"),
    (
        "github-fine-grained-pat",
        r"\bgithub_pat_[A-Za-z0-9_]{82}\b",
    ),
    (
        "gitlab-token",
        r"\bgl(?:pat|rt|dt|ptt|ft|oas)-[A-Za-z0-9_-]{20,64}\b",
    ),
    ("bitbucket-app-password", r"\bATBB[A-Za-z0-9_=.-]{32,64}\b"),
    ("atlassian-api-token", r"\bATATT3[A-Za-z0-9_=-]{180,200}\b"),
    // Chat.
    ("slack-token", r"\bxox[abeoprs]-[0-9A-Za-z-]{10,250}"),
    (
        "slack-app-token",
        r"\bxapp-[0-9]-[A-Z0-9]{8,20}-[0-9]{8,20}-[a-z0-9]{32,80}\b",
    ),
    (
        "slack-webhook",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{20,200}",
    ),
    (
        "discord-webhook",
        r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]{10,25}/[A-Za-z0-9_-]{60,70}",
    ),
    (
        "discord-bot-token",
        r"\b[A-Za-z0-9_-]{10,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}\b",
    ),
    ("telegram-bot-token", r"\b[0-9]{8,10}:AA[0-9A-Za-z_-]{33}\b"),
    // Payments and messaging services.
    (
        "stripe-key",
        r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{24,99}\b",
    ),
    ("stripe-webhook-secret", r"\bwhsec_[A-Za-z0-9]{32,64}\b"),
    ("square-token", r"\bsq0(?:atp|csp)-[0-9A-Za-z_-]{22,43}\b"),
    ("shopify-token", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b"),
    ("twilio-api-key", r"\bSK[0-9a-fA-F]{32}\b"),
    (
        "sendgrid-api-key",
        r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b",
    ),
    ("mailgun-key", r"\bkey-[0-9a-f]{32}\b"),
    // AI and package registries.
    (
        "anthropic-api-key",
        r"\bsk-ant-[a-z]{2,8}[0-9]{0,3}-[A-Za-z0-9_-]{32,200}",
    ),
    (
        "openai-api-key",
        r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,200}",
    ),
    ("huggingface-token", r"\b(?:hf_|api_org_)[A-Za-z]{34}\b"),
    ("npm-token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    ("pypi-token", r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,300}"),
    ("linear-api-key", r"\blin_api_[A-Za-z0-9]{40}\b"),
    ("databricks-token", r"\bdapi[a-f0-9]{32}(?:-[0-9])?\b"),
    ("doppler-token", r"\bdp\.pt\.[A-Za-z0-9]{43}\b"),
    ("groq-api-key", r"\bgsk_[A-Za-z0-9]{48,56}\b"),
    ("xai-api-key", r"\bxai-[A-Za-z0-9]{70,90}\b"),
    ("perplexity-api-key", r"\bpplx-[A-Za-z0-9]{40,56}\b"),
    ("replicate-api-token", r"\br8_[A-Za-z0-9]{37}\b"),
    // Infrastructure and observability.
    ("vault-token", r"\bhv[sbr]\.[A-Za-z0-9_-]{24,300}"),
    (
        "terraform-cloud-token",
        r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}",
    ),
    (
        "grafana-token",
        r"\b(?:glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}\b|glc_[A-Za-z0-9+/]{32,400}={0,2})",
    ),
    ("newrelic-api-key", r"\bNRAK-[A-Z0-9]{27}\b"),
    (
        "postman-api-key",
        r"\bPMAK-[A-Fa-f0-9]{24}-[A-Fa-f0-9]{34}\b",
    ),
    ("supabase-token", r"\bsbp_[a-f0-9]{40}\b"),
    ("heroku-api-key", r"\bHRKU-[A-Za-z0-9_-]{20,80}"),
    (
        "kubeconfig-client-key",
        r#"(?i)\bclient-key-data["']?\s*:\s*["']?(?P<s>[A-Za-z0-9+/]{16,4096}={0,2})"#,
    ),
    (
        "docker-auth",
        r#""auth"\s*:\s*"(?P<s>[A-Za-z0-9+/]{8,1024}={0,2})""#,
    ),
    (
        "azure-sas-signature",
        r"(?i)[?&]sig=(?P<s>[A-Za-z0-9%+/]{16,256}(?:%3D|=){0,2})",
    ),
    // Structured tokens.
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_-]{8,2048}\.eyJ[A-Za-z0-9_-]{8,4096}\.[A-Za-z0-9_-]{8,1024}",
    ),
    // Credentials in URLs and headers: keep the scheme, user and host.
    (
        "url-password",
        r"\b[A-Za-z][A-Za-z0-9+.-]{0,15}://[^\s:/@\[\]]{0,128}:(?P<s>[^\s/@\[\]]{1,256})@",
    ),
    (
        "bearer-token",
        r"(?i)\bbearer\s+(?P<s>[A-Za-z0-9._~+/-]{20,1024}=*)",
    ),
    (
        "basic-auth",
        r#"(?i)\bauthorization["']?\s*[:=]\s*["']?basic\s+(?P<s>[A-Za-z0-9+/]{4,1024}={0,2})"#,
    ),
    (
        "netrc-password",
        r"(?i)\bmachine\s+[^\s]{1,256}\s+(?:login\s+[^\s]{1,256}\s+)?password\s+(?P<s>[^\s\[][^\s]{0,255})",
    ),
    // Generic assignments: `password=…`, `"secret": "…"`, `API_KEY: …`.
    (
        "secret-assignment",
        r#"(?i)\b(?:[a-z0-9]+[_-])*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|client[_-]?secret|auth[_-]?token)["']?\s*[:=]\s*["']?(?P<s>[^\s"'`&;,\[\]{}()<>]{4,256})"#,
    ),
];
