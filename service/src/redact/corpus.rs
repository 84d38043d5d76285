//! Fake credentials, one per detected format, for tests (the unit tests here
//! and the end-to-end corpus test through the fixture agent).
//!
//! Built at run time from pieces so that the source holds no string a
//! secret scanner would flag; none of them is or was ever valid.

/// One fake credential.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The detector that must catch it.
    pub detector: &'static str,
    /// The credential in context, as an agent might print it.
    pub text: String,
    /// The part that must never survive redaction.
    pub secret: String,
}

/// One sample per format (several for some detectors).
pub fn sample_credentials() -> Vec<Sample> {
    let whole = |detector: &'static str, text: String| Sample {
        detector,
        secret: text.clone(),
        text,
    };
    let part = |detector: &'static str, context: &str, secret: String| Sample {
        detector,
        text: context.replace("{}", &secret),
        secret,
    };
    let a = |n: usize| "a".repeat(n);
    let x = |n: usize| "7".repeat(n);
    let up = |n: usize| "Q".repeat(n);
    let pem = |kind: &str| {
        format!(
            "-----BEGIN {kind}PRIVATE KEY-----\nMIIEv{}\n{}==\n-----END {kind}PRIVATE KEY-----",
            "Q".repeat(60),
            "z".repeat(40)
        )
    };
    vec![
        whole("private-key", pem("RSA ")),
        whole("private-key", pem("OPENSSH ")),
        part(
            "private-key",
            "{\"type\":\"service_account\",\"private_key\":\"{}\"}",
            pem(""),
        ),
        whole("lapis-token", format!("lapis_{}", x(64))),
        whole("lapis-bearer", format!("lapis_s_{}", "e".repeat(64))),
        whole("lapis-ticket", format!("lapis_tkt_{}", "d".repeat(64))),
        whole("aws-access-key-id", format!("AKIA{}", "IOSFODNN7EXAMPL2")),
        part(
            "aws-secret-access-key",
            "aws_secret_access_key = {}",
            format!("{}{}", "wJalrXUtnFEMI/K7MDENG/", "bPxRfiCYEXAMPLEKEY"),
        ),
        whole("gcp-api-key", format!("AIza{}", "S".repeat(35))),
        whole("gcp-oauth-secret", format!("GOCSPX-{}", a(28))),
        whole("gcp-access-token", format!("ya29.{}", "a0Af".repeat(10))),
        part(
            "azure-storage-key",
            "DefaultEndpointsProtocol=https;AccountName=x;AccountKey={}",
            format!("{}==", "K".repeat(86)),
        ),
        whole("azure-client-secret", format!("abc8Q~{}", "d".repeat(34))),
        whole("digitalocean-token", format!("dop_v1_{}", "f".repeat(64))),
        whole(
            "age-secret-key",
            format!("AGE-SECRET-KEY-1{}", "Q".repeat(58)),
        ),
        whole("github-token", format!("ghp_{}", up(36))),
        whole("github-token", format!("gho_{}", up(36))),
        whole("github-token", format!("ghu_{}", up(36))),
        whole("github-token", format!("ghs_{}", up(36))),
        whole("github-token", format!("ghr_{}", up(36))),
        whole("github-fine-grained-pat", format!("github_pat_{}", up(82))),
        whole("gitlab-token", format!("glpat-{}", up(20))),
        whole("bitbucket-app-password", format!("ATBB{}", up(32))),
        whole("atlassian-api-token", format!("ATATT3{}", up(186))),
        whole("slack-token", format!("xoxb-{}-{}-{}", x(12), x(13), a(24))),
        whole(
            "slack-app-token",
            format!("xapp-1-A{}-{}-{}", up(9), x(13), "c".repeat(64)),
        ),
        whole(
            "slack-webhook",
            format!(
                "https://hooks.slack.com/services/T{}/B{}/{}",
                up(8),
                up(8),
                a(24)
            ),
        ),
        whole(
            "discord-webhook",
            format!("https://discord.com/api/webhooks/{}/{}", x(18), a(68)),
        ),
        whole(
            "discord-bot-token",
            format!("M{}.{}.{}", "T".repeat(23), "G".repeat(6), "h".repeat(27)),
        ),
        whole(
            "telegram-bot-token",
            format!("{}:AA{}", x(10), "H".repeat(33)),
        ),
        whole("stripe-key", format!("sk_live_{}", "4".repeat(24))),
        whole("stripe-key", format!("rk_live_{}", "4".repeat(24))),
        whole("stripe-webhook-secret", format!("whsec_{}", a(32))),
        whole("square-token", format!("sq0atp-{}", up(22))),
        whole("shopify-token", format!("shpat_{}", "b".repeat(32))),
        whole("twilio-api-key", format!("SK{}", "c".repeat(32))),
        whole(
            "sendgrid-api-key",
            format!("SG.{}.{}", "N".repeat(22), "n".repeat(43)),
        ),
        whole("mailgun-key", format!("key-{}", "9".repeat(32))),
        whole(
            "anthropic-api-key",
            format!("sk-ant-api03-{}", "W".repeat(93)),
        ),
        whole("openai-api-key", format!("sk-proj-{}", "V".repeat(48))),
        whole(
            "openai-api-key",
            format!("sk-{}T3BlbkFJ{}", "V".repeat(20), "v".repeat(20)),
        ),
        whole("huggingface-token", format!("hf_{}", "h".repeat(34))),
        whole("npm-token", format!("npm_{}", "N".repeat(36))),
        whole(
            "pypi-token",
            format!("pypi-AgEIcHlwaS5vcmc{}", "P".repeat(60)),
        ),
        whole("linear-api-key", format!("lin_api_{}", "L".repeat(40))),
        whole("databricks-token", format!("dapi{}", "d".repeat(32))),
        whole("doppler-token", format!("dp.pt.{}", "D".repeat(43))),
        whole(
            "jwt",
            format!(
                "eyJ{}.eyJ{}.{}",
                "hbGciOiJIUzI1NiJ9",
                "zdWIiOiIxMjM0NTY3ODkwIn0",
                "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
            ),
        ),
        part(
            "url-password",
            "postgres://admin:{}@db.internal:5432/app",
            "s3cr3t-Pa55".to_owned(),
        ),
        part(
            "url-password",
            "redis://:{}@cache.internal:6379/0",
            "r3dis-Pa55".to_owned(),
        ),
        whole("groq-api-key", format!("gsk_{}", "G".repeat(52))),
        whole("xai-api-key", format!("xai-{}", "X".repeat(80))),
        whole("perplexity-api-key", format!("pplx-{}", "p".repeat(48))),
        whole("replicate-api-token", format!("r8_{}", "R".repeat(37))),
        whole("vault-token", format!("hvs.CAESI{}", "J".repeat(86))),
        whole(
            "terraform-cloud-token",
            format!("{}.atlasv1.{}", "T".repeat(14), "t".repeat(64)),
        ),
        whole(
            "grafana-token",
            format!("glsa_{}_{}", "g".repeat(32), "0a1b2c3d"),
        ),
        whole("grafana-token", format!("glc_{}", "Gr4f".repeat(12))),
        whole("newrelic-api-key", format!("NRAK-{}", "N".repeat(27))),
        whole(
            "postman-api-key",
            format!("PMAK-{}-{}", "a".repeat(24), "b".repeat(34)),
        ),
        whole("supabase-token", format!("sbp_{}", "5".repeat(40))),
        whole("heroku-api-key", format!("HRKU-AA{}", "h".repeat(58))),
        part(
            "basic-auth",
            "Authorization: Basic {}",
            "dXNlcjpwYXNz".repeat(2),
        ),
        part(
            "azure-sas-signature",
            "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sp=r&sig={}",
            format!("{}%3D", "S1g".repeat(12)),
        ),
        part(
            "docker-auth",
            "{\"auths\":{\"registry.example\":{\"auth\": \"{}\"}}}",
            "ZG9ja2VyOnB3".repeat(3),
        ),
        part(
            "netrc-password",
            "machine api.example.com login me password {}",
            "n3trc-Pa55".to_owned(),
        ),
        part(
            "kubeconfig-client-key",
            "    client-key-data: {}",
            format!("{}==", "LS0tLS1CRUdJTi".repeat(4)),
        ),
        part("bearer-token", "Authorization: Bearer {}", "tok".repeat(10)),
        part(
            "secret-assignment",
            "password={}",
            "hunter2hunter2".to_owned(),
        ),
        part(
            "secret-assignment",
            "\"client_secret\": \"{}\"",
            "Zx".repeat(12),
        ),
        part(
            "secret-assignment",
            "DB_TOKEN: {}",
            "abc123def456".to_owned(),
        ),
    ]
}
