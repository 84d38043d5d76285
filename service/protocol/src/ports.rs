//! A thread's application ports as one value: [`ThreadPorts`] (what it
//! binds), [`PortsExpect`] (what a reattaching client states about it) and
//! [`PortsPatch`] (what `threads.configure` may change of it).
//!
//! Each is `#[serde(flatten)]`ed into the thread structs that carry it
//! (`threads.create`, the [`Thread`](crate::Thread) record, the
//! `thread_created` payload, the store's create input; `threads.attach`'s
//! expectation; `threads.configure` and the store's patch), so a port kind
//! is one member here, spelled once. The one exception is the
//! `thread_configured` payload, which records the value after the change
//! of what a configure may change (today `transcriptStore` alone) and
//! spells it: a kind that becomes reconfigurable adds it to [`PortsPatch`]
//! and there.
//!
//! What must stay true: the flattened members keep their wire names
//! (`tools`, `context`, `memory`, `transcriptStore`) and their omission
//! rules (an empty list or an absent name is left off the wire), so every
//! struct serializes to exactly the object it did when it spelled them
//! out. The journal stores payloads through `serde_json::Value`, whose
//! keys are sorted, so where the flattened members sit among the others
//! does not change a stored byte either. Only names persist, never a
//! callback: the registration behind a name is the connection's (see the
//! `context`, `memory` and `transcript` modules).

use serde::{Deserialize, Serialize};

/// The thread records' members and [`PortKind`], from the one declaration
/// of the named kinds (`crate::port_kinds!`): tool endpoints first (bound
/// as a list, spelled out here), then each row's member under its wire
/// name, in row order.
macro_rules! thread_ports {
    ($(
        $(#[$doc:meta])*
        $Kind:ident {
            member: $member:ident = $wire:literal,
            label: $label:literal,
            binding: { $(#[$bdoc:meta])* },
            params: $params:ty,
            register: $Reg:ident = $reg:literal, $($rest:tt)*
        }
    )*) => {
        /// The application ports a thread binds, by name.
        #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct ThreadPorts {
            /// Names of tool endpoints this application registered
            /// (`tools.register`) whose tools every turn's agent session reaches
            /// through the controller's MCP bridge. Only the names persist; a turn
            /// whose endpoint is gone fails `tool_endpoint_unavailable` at claim.
            /// Refused on restricted threads (`tools_restricted`).
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub tools: Vec<String>,
            $(
                $(#[$bdoc])*
                #[serde(default, rename = $wire, skip_serializing_if = "Option::is_none")]
                pub $member: Option<String>,
            )*
            /// The registration identity (`<kind>_` + SHA-256 of its description)
            /// of each port bound above, as the controller found it when the
            /// binding was made (at `threads.create`, or at the `threads.configure`
            /// that rebound a transcript store); set by the controller (what a
            /// client sends is replaced). A claim or `threads.attach` whose port is
            /// now registered with another identity fails `binding_mismatch`. A
            /// binding without one (a thread created before identities were
            /// recorded) is checked by name only.
            #[serde(
                default,
                rename = "portIdentities",
                skip_serializing_if = "PortIdentities::is_empty"
            )]
            pub identities: PortIdentities,
        }

        /// The identities of a thread's bound ports, by kind (tool endpoints by
        /// name).
        #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct PortIdentities {
            /// Each bound tool endpoint's identity, by endpoint name.
            #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
            pub tools: std::collections::BTreeMap<String, String>,
            $(
                #[doc = concat!("The ", $label, "'s.")]
                #[serde(default, rename = $wire, skip_serializing_if = "Option::is_none")]
                pub $member: Option<String>,
            )*
        }

        /// What a client expects of a thread's ports when it (re)attaches or
        /// submits; absent members are not checked. A name member stated as `""`
        /// states that the thread binds none.
        #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct PortsExpect {
            /// The application tool endpoints (names, in order) the thread binds.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub tools: Option<Vec<String>>,
            $(
                #[doc = concat!("The application ", $label, " (name) the thread binds; `\"\"`")]
                #[doc = "states that it binds none."]
                #[serde(default, rename = $wire, skip_serializing_if = "Option::is_none")]
                pub $member: Option<String>,
            )*
        }

        /// The kinds of application port: each its own name space in the
        /// controller's registry and one member of [`ThreadPorts`],
        /// [`PortIdentities`] and [`PortsExpect`]. This is the one per-kind table
        /// the per-kind checks iterate ([`PortsExpect::mismatches`], the
        /// registry's identity check); its named kinds are the rows of
        /// `crate::port_kinds!`, so a new kind is a row there, never a line at
        /// each check.
        ///
        /// What must stay true: [`PortKind::ALL`] is in declaration order (the
        /// order `data.fields` names members in) and [`PortKind::wire`] is the
        /// member's wire name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum PortKind {
            /// Tool endpoints (`tools.register`), member `tools`.
            Tools,
            $(
                #[doc = concat!("A ", $label, " (`", $reg, "`), member `", $wire, "`.")]
                $Kind,
            )*
        }

        impl PortKind {
            /// Every kind, in declaration order.
            pub const ALL: [PortKind; 1 + [$(stringify!($Kind)),*].len()] =
                [PortKind::Tools, $(PortKind::$Kind),*];

            /// The member's wire name (in the thread structs and `data.fields`).
            pub fn wire(self) -> &'static str {
                match self {
                    PortKind::Tools => "tools",
                    $(PortKind::$Kind => $wire,)*
                }
            }

            /// The names of this kind `ports` binds, in order.
            pub fn bound(self, ports: &ThreadPorts) -> &[String] {
                match self {
                    PortKind::Tools => &ports.tools,
                    $(PortKind::$Kind => ports.$member.as_slice(),)*
                }
            }

            /// The member of `ports` that binds this named kind (`None` for
            /// tool endpoints, bound as a list).
            pub fn named_mut(self, ports: &mut ThreadPorts) -> Option<&mut Option<String>> {
                match self {
                    PortKind::Tools => None,
                    $(PortKind::$Kind => Some(&mut ports.$member),)*
                }
            }

            /// The identity recorded for the bound port `name` of this kind, if
            /// one was (a name-only binding has none).
            pub fn recorded<'a>(self, ids: &'a PortIdentities, name: &str) -> Option<&'a str> {
                match self {
                    PortKind::Tools => ids.tools.get(name),
                    $(PortKind::$Kind => ids.$member.as_ref(),)*
                }
                .map(String::as_str)
            }

            /// Whether `expect` states this kind and `ports` does not meet it.
            pub fn unmet(self, expect: &PortsExpect, ports: &ThreadPorts) -> bool {
                match self {
                    PortKind::Tools => expect.tools.as_ref().is_some_and(|t| *t != ports.tools),
                    $(PortKind::$Kind => named_differs(&expect.$member, &ports.$member),)*
                }
            }
        }

        impl PortsExpect {
            /// The expectation `ports` meets exactly (every member stated).
            pub fn of(ports: &ThreadPorts) -> PortsExpect {
                PortsExpect {
                    tools: Some(ports.tools.clone()),
                    $($member: Some(ports.$member.clone().unwrap_or_default()),)*
                }
            }
        }
    };
}

crate::port_kinds!(thread_ports);
impl PortIdentities {
    /// Whether none is recorded (name-only bindings).
    pub fn is_empty(&self) -> bool {
        *self == PortIdentities::default()
    }
}

impl ThreadPorts {
    /// Whether a turn gets the controller's MCP bridge: the thread binds
    /// application tools, or a memory port (whose read tools ride the
    /// bridge). A restricted thread binds neither.
    pub fn bridged(&self) -> bool {
        !self.tools.is_empty() || self.memory.is_some()
    }

    /// The name a bridge refusal names: the first tool endpoint, else the
    /// memory port (empty when the thread binds neither).
    pub fn bridge_name(&self) -> &str {
        self.tools
            .first()
            .or(self.memory.as_ref())
            .map_or("", String::as_str)
    }

    /// This value with `patch` applied (members it leaves absent are kept).
    #[must_use]
    pub fn patched(&self, patch: &PortsPatch) -> ThreadPorts {
        let mut identities = self.identities.clone();
        if patch.transcript_store.is_some() {
            // A rebound store carries the identity the controller found
            // (none when it is unbound).
            identities
                .transcript_store
                .clone_from(&patch.transcript_store_identity);
        }
        ThreadPorts {
            transcript_store: patch
                .transcript_store
                .clone()
                .unwrap_or_else(|| self.transcript_store.clone()),
            identities,
            ..self.clone()
        }
    }
}

/// A stated name against a bound one (`""` stands for none).
fn named_differs(expected: &Option<String>, bound: &Option<String>) -> bool {
    expected
        .as_ref()
        .is_some_and(|e| e.as_str() != bound.as_deref().unwrap_or_default())
}

impl PortsExpect {
    /// The wire names of the members whose expectation `ports` does not
    /// meet, in declaration order.
    pub fn mismatches(&self, ports: &ThreadPorts) -> Vec<&'static str> {
        PortKind::ALL
            .into_iter()
            .filter(|k| k.unmet(self, ports))
            .map(PortKind::wire)
            .collect()
    }
}

/// What `threads.configure` may change of a thread's ports: today the
/// transcript store alone (the other kinds are fixed at creation).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortsPatch {
    /// New transcript store (`transcript.register`): `Some(Some(name))`
    /// binds one (the thread's retention, after this call, must be
    /// `metadata-only`); `Some(None)` (JSON `null`) unbinds it; `None`
    /// (absent) leaves it unchanged. A thread that binds one cannot be
    /// made `full` without unbinding it in the same call.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub transcript_store: Option<Option<String>>,
    /// The registration identity of the store `transcript_store` binds,
    /// as the controller found it when the call was checked; set by the
    /// controller, never read from or written to the wire.
    #[serde(skip)]
    pub transcript_store_identity: Option<String>,
}

/// A member that is present deserializes to `Some`, even when it is
/// `null` (`Some(None)`); an absent one stays `None` (`#[serde(default)]`).
pub(crate) fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// The named kinds in their declaration's order, with their member's
/// name (for the test that rows, members and [`PortKind`] agree).
#[cfg(test)]
macro_rules! named_kinds {
    ($(
        $(#[$doc:meta])*
        $Kind:ident {
            member: $member:ident = $wire:literal,
            label: $label:literal,
            binding: { $(#[$bdoc:meta])* },
            params: $params:ty,
            register: $Reg:ident = $reg:literal, $reg_fn:ident,
            unregister: $Unreg:ident = $unreg:literal, $unreg_fn:ident,
            handler: $Handler:path, $setter:ident, $serve:ident, $answer:path, [$($cb:path),+ $(,)?],
        }
    )*) => {

        const NAMED_KINDS: &[(PortKind, &str)] = &[$((PortKind::$Kind, stringify!($member))),*];
    };
}

#[cfg(test)]
crate::port_kinds!(named_kinds);

#[cfg(test)]
mod tests;
