//! IOS interface names (`Serial0/0`, `S0/0`, `GigabitEthernet0/1.10`, `Loopback0`) and the
//! Linux names the same interfaces get on an FRR router (`s0-0`, `gi0-1.10`, `lo0`).

use crate::IosError;

/// The interface types IOS names, with the Linux prefix each becomes. IOS accepts any prefix
/// of the type that names one type only (`S`, `Se`, `Ser`, `Gi`, `Fa`, `Lo`...).
const TYPES: [(&str, &str); 11] = [
    ("Ethernet", "e"),
    ("FastEthernet", "fa"),
    ("GigabitEthernet", "gi"),
    ("TenGigabitEthernet", "te"),
    ("Serial", "s"),
    ("Loopback", "lo"),
    ("Tunnel", "tu"),
    ("Vlan", "vl"),
    ("Port-channel", "po"),
    ("Dialer", "di"),
    ("BVI", "bvi"),
];

/// The longest Linux interface name (IFNAMSIZ - 1).
const IFNAMSIZ: usize = 15;

/// One interface, by its IOS type and number.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Interface {
    /// The full IOS type (`Serial`).
    pub kind: &'static str,
    /// `0/0`, `0/1.10`.
    pub number: String,
}

impl Interface {
    /// `Serial0/0`, `Serial 0/0`, `S0/0`, `gi0/1.10`, `Lo0`; `None` for what is not an IOS
    /// interface name (a Linux name like `eth0`, an address).
    pub fn parse(text: &str) -> Result<Option<Self>, IosError> {
        let text = text.trim();
        let split = text.find(|c: char| c.is_ascii_digit()).unwrap_or(text.len());
        let (kind, number) = (text[..split].trim_end(), &text[split..]);
        if kind.is_empty() || number.is_empty() || !kind.chars().all(|c| c.is_ascii_alphabetic() || c == '-')
        {
            return Ok(None);
        }
        let valid_number =
            number.split(['/', '.']).all(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
                && number.matches('.').count() <= 1;
        if !valid_number {
            return Ok(None);
        }
        let matches: Vec<&(&str, &str)> = TYPES
            .iter()
            .filter(|(t, _)| t.len() >= kind.len() && t[..kind.len()].eq_ignore_ascii_case(kind))
            .collect();
        match matches.as_slice() {
            [] => Ok(None),
            [(t, _)] => Ok(Some(Self { kind: t, number: number.to_string() })),
            many => Err(IosError::Ambiguous {
                what: text.to_string(),
                choices: many.iter().map(|(t, _)| t.to_string()).collect(),
            }),
        }
    }

    /// The IOS name as IOS prints it: `Serial0/0`.
    pub fn ios(&self) -> String {
        format!("{}{}", self.kind, self.number)
    }

    /// The Linux name on the router: the type's short prefix, `/` as `-` (`s0-0`, `gi0-1.10`).
    pub fn linux(&self) -> Result<String, IosError> {
        let prefix = TYPES.iter().find(|(t, _)| *t == self.kind).map_or("if", |(_, p)| p);
        let name = format!("{prefix}{}", self.number.replace('/', "-"));
        if name.len() > IFNAMSIZ {
            return Err(IosError::NameTooLong { ios: self.ios(), linux: name });
        }
        Ok(name)
    }

    /// A loopback: on Linux, an interface of its own ([`crate::loopback`]; the namespace's `lo`
    /// is one only).
    pub fn is_loopback(&self) -> bool {
        self.kind == "Loopback"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ios_spellings_map_to_one_linux_name() {
        for (ios, linux, full) in [
            ("Serial0/0", "s0-0", "Serial0/0"),
            ("S0/0", "s0-0", "Serial0/0"),
            ("se 0/1", "s0-1", "Serial0/1"),
            ("GigabitEthernet0/1.10", "gi0-1.10", "GigabitEthernet0/1.10"),
            ("Gi0/1", "gi0-1", "GigabitEthernet0/1"),
            ("fa0/0", "fa0-0", "FastEthernet0/0"),
            ("Loopback0", "lo0", "Loopback0"),
            ("Lo10", "lo10", "Loopback10"),
            ("Ethernet1/0/3", "e1-0-3", "Ethernet1/0/3"),
            // IOS reads `eth0` as Ethernet0: in an IOS task, names are IOS names.
            ("eth0", "e0", "Ethernet0"),
        ] {
            let i = Interface::parse(ios).expect("parses").unwrap_or_else(|| panic!("{ios}: an interface"));
            assert_eq!((i.linux().expect("fits").as_str(), i.ios().as_str()), (linux, full), "{ios}");
        }
    }

    #[test]
    fn what_is_not_an_ios_interface_is_left_alone_and_ambiguity_is_an_error() {
        for other in ["10.0.0.1", "lo", "0/0", "Serial", "Serial0//0", "any"] {
            assert_eq!(Interface::parse(other).expect("no error"), None, "{other}");
        }
        // `T` is Tunnel or TenGigabitEthernet.
        assert!(matches!(Interface::parse("T0"), Err(IosError::Ambiguous { .. })));
        let long = Interface::parse("TenGigabitEthernet1/0/1/0/1.1000").expect("parses").expect("some");
        assert!(matches!(long.linux(), Err(IosError::NameTooLong { .. })));
    }
}
