//! The cheap first look: can this text contain a credential at all?
//!
//! Almost every journaled payload holds none, so redaction asks this before
//! the [`RegexSet`](regex::RegexSet): one Aho-Corasick scan for literals that
//! every match of some detector must contain, plus a scan of the `.`s for the
//! one detector without a literal (Discord bot tokens). "No" here means no
//! detector can match; "yes" only means the set must look.
//!
//! What must stay true: every detector in [`super::detectors`] has a literal
//! in [`CASED`] or [`ANY_CASE`] that each of its matches contains (or is the
//! Discord pattern checked by [`dotted_token`]). A detector added without one
//! would be skipped on text that needs it; the corpus test
//! (`every_sample_is_caught_with_its_typed_marker`) and the property test
//! `the_prefilter_never_hides_a_match` catch that.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};

/// Literals compared as written (their detectors are case-sensitive).
const CASED: &[&str] = &[
    "-----BEGIN",       // private-key
    "lapis_",           // lapis-token, lapis-bearer, lapis-ticket
    "A3T",              // aws-access-key-id
    "AKIA",             // aws-access-key-id
    "ASIA",             // aws-access-key-id
    "ABIA",             // aws-access-key-id
    "ACCA",             // aws-access-key-id
    "AIza",             // gcp-api-key
    "GOCSPX-",          // gcp-oauth-secret
    "ya29.",            // gcp-access-token
    "Q~",               // azure-client-secret
    "_v1_",             // digitalocean-token
    "AGE-SECRET-KEY-1", // age-secret-key
    "ghp_",             // github-token
    "gho_",             // github-token
    "ghu_",             // github-token
    "ghs_",             // github-token
    "ghr_",             // github-token
    "github_pat_",      // github-fine-grained-pat
    "glpat-",           // gitlab-token
    "glrt-",            // gitlab-token
    "gldt-",            // gitlab-token
    "glptt-",           // gitlab-token
    "glft-",            // gitlab-token
    "gloas-",           // gitlab-token
    "ATBB",             // bitbucket-app-password
    "ATATT3",           // atlassian-api-token
    "xox",              // slack-token
    "xapp-",            // slack-app-token
    "://",              // slack-webhook, discord-webhook, url-password
    ":AA",              // telegram-bot-token
    "k_live_",          // stripe-key (sk_, rk_)
    "k_test_",          // stripe-key (sk_, rk_)
    "whsec_",           // stripe-webhook-secret
    "sq0",              // square-token
    "shp",              // shopify-token
    "SK",               // twilio-api-key
    "SG.",              // sendgrid-api-key
    "key-",             // mailgun-key
    "sk-",              // anthropic-api-key, openai-api-key
    "hf_",              // huggingface-token
    "api_org_",         // huggingface-token
    "npm_",             // npm-token
    "pypi-",            // pypi-token
    "lin_api_",         // linear-api-key
    "dapi",             // databricks-token
    "dp.pt.",           // doppler-token
    "eyJ",              // jwt
    "gsk_",             // groq-api-key
    "xai-",             // xai-api-key
    "pplx-",            // perplexity-api-key
    "r8_",              // replicate-api-token
    "hvs.",             // vault-token
    "hvb.",             // vault-token
    "hvr.",             // vault-token
    ".atlasv1.",        // terraform-cloud-token
    "glsa_",            // grafana-token
    "glc_",             // grafana-token
    "NRAK-",            // newrelic-api-key
    "PMAK-",            // postman-api-key
    "sbp_",             // supabase-token
    "HRKU-",            // heroku-api-key
    "\"auth\"",         // docker-auth
];

/// Literals compared ASCII-case-insensitively (their detectors are `(?i)`).
const ANY_CASE: &[&str] = &[
    "aws",             // aws-secret-access-key
    "key",    // azure-storage-key (AccountKey=), secret-assignment (api/access/private key)
    "bearer", // bearer-token
    "passw",  // secret-assignment (password, passwd)
    "pwd",    // secret-assignment
    "secret", // secret-assignment (secret, client secret)
    "token",  // secret-assignment (token, auth token)
    "client-key-data", // kubeconfig-client-key
    "sig=",   // azure-sas-signature
    "authorization", // basic-auth
    "machine", // netrc-password
];

/// The compiled literal scan.
#[derive(Debug)]
pub(super) struct Prefilter {
    /// [`CASED`] as written and every ASCII case variant of [`ANY_CASE`],
    /// in one DFA: one pass over the text, one table lookup per byte.
    literals: AhoCorasick,
}

/// Every ASCII case variant of `lit` (`aws` → `aws`, `Aws`, …, `AWS`).
fn case_variants(lit: &str) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = vec![Vec::new()];
    for b in lit.bytes() {
        let (lo, up) = (b.to_ascii_lowercase(), b.to_ascii_uppercase());
        out = out
            .into_iter()
            .flat_map(|v| {
                let mut a = v.clone();
                a.push(lo);
                let mut both = vec![a];
                if up != lo {
                    let mut z = v;
                    z.push(up);
                    both.push(z);
                }
                both
            })
            .collect();
    }
    out
}

impl Prefilter {
    pub(super) fn new() -> Prefilter {
        let mut patterns: Vec<Vec<u8>> = CASED.iter().map(|l| l.as_bytes().to_vec()).collect();
        for lit in ANY_CASE {
            patterns.extend(case_variants(lit));
        }
        // A DFA without the crate's own prefilter: on short texts (most
        // chunks) the packed searchers fall back to slower paths, and two
        // scans (cased, then case-insensitive) cost twice; one DFA walk is
        // the cheapest exact answer.
        let literals = AhoCorasickBuilder::new()
            .kind(Some(AhoCorasickKind::DFA))
            .match_kind(MatchKind::Standard)
            .prefilter(false)
            .build(&patterns)
            .expect("prefilter literals compile");
        Prefilter { literals }
    }

    /// Whether some detector could match `text` (see the module docs).
    pub(super) fn candidate(&self, text: &str) -> bool {
        self.literals.is_match(text) || dotted_token(text.as_bytes())
    }
}

fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Whether `text` has the shape of a Discord bot token somewhere: at least
/// 10 token bytes, `.`, exactly 6, `.`, at least 27 (the detector's
/// `[A-Za-z0-9_-]{10,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}`).
fn dotted_token(text: &[u8]) -> bool {
    dots(text).any(|i| {
        let mid = text.get(i + 1..i + 7);
        mid.is_some_and(|m| m.iter().all(|b| token_byte(*b)))
            && text.get(i + 7) == Some(&b'.')
            && text[..i]
                .iter()
                .rev()
                .take_while(|b| token_byte(**b))
                .count()
                >= 10
            && text[i + 8..].iter().take_while(|b| token_byte(**b)).count() >= 27
    })
}

/// Positions of `.` in `text`.
fn dots(text: &[u8]) -> impl Iterator<Item = usize> + '_ {
    memchr::memchr_iter(b'.', text)
}
