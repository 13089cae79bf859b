/// A name lookup, injected so that this module stays free of libc.
public protocol HostResolver: Sendable {
    /// Every address `name` resolves to, or a reason it does not resolve.
    func resolve(_ name: String) -> Result<[IPAddress], ResolveFailure>
}

public struct ResolveFailure: Error, Sendable, Equatable {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
}

extension TunnelSettings {
    /// Resolves the carrier endpoints to addresses (each once, in order). Every endpoint must
    /// resolve; each failure is reported under its key path.
    public func resolveCarrierEndpoints(using resolver: some HostResolver) throws(ConfigurationError) -> [IPAddress] {
        var seen = Set<IPAddress>()
        return try pinCarrierEndpoints(using: resolver).map(\.address).filter { seen.insert($0).inserted }
    }
}

/// What the routing table of a tunnel must hold for one address family,
/// computed with iOS semantics: the most specific prefix wins, an exclusion
/// wins a tie with an inclusion, carrier endpoints are always excluded.
public struct FamilyRouting: Sendable, Equatable {
    public var family: IPFamily
    /// Prefixes routed into the tunnel (`dev TUN` in the tunnel's table).
    public var included: [Route]
    /// Prefixes kept off the tunnel (`throw` routes in the tunnel's table):
    /// the lookup falls through to the main table and its physical path.
    public var excluded: [IPPrefix]
    /// Which of `excluded` are carrier endpoints (for the plan's wording).
    public var carriers: Set<IPPrefix>

    /// True when the tunnel routes anything of this family.
    public var isActive: Bool { !included.isEmpty }
}

public struct RoutingIntent: Sendable, Equatable {
    public var ipv4: FamilyRouting
    public var ipv6: FamilyRouting

    /// What `excludeLocalNetworks` keeps off the tunnel: RFC 1918, link-local,
    /// multicast and limited broadcast; link-local, unique local and multicast.
    public static let localNetworks: [IPFamily: [IPPrefix]] = [
        .ipv4: ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "224.0.0.0/4", "255.255.255.255/32"].map { IPPrefix($0)! },
        .ipv6: ["fe80::/10", "fc00::/7", "ff00::/8"].map { IPPrefix($0)! },
    ]

    public var families: [FamilyRouting] { [ipv4, ipv6] }

    public init(settings: TunnelSettings, carrierAddresses: [IPAddress]) {
        // The tunnel's DNS servers are reached through the tunnel, as on iOS.
        let dns = (settings.dnsSettings?.servers ?? []).map { Route(destination: IPPrefix(address: $0, length: $0.family.bitWidth)!) }
        // Replies to the hosts a gateway forwards for go back the way they came, not into the tunnel.
        let sources = settings.forwarding?.sources ?? []
        ipv4 = Self.compute(.ipv4, included: (settings.ipv4Settings?.includedRoutes ?? []) + dns.filter { $0.destination.family == .ipv4 },
                            excluded: (settings.ipv4Settings?.excludedRoutes.map(\.destination) ?? []) + sources.filter { $0.family == .ipv4 },
                            local: settings.excludeLocalNetworks ? Self.localNetworks[.ipv4]! : [],
                            carriers: carrierAddresses)
        ipv6 = Self.compute(.ipv6, included: (settings.ipv6Settings?.includedRoutes ?? []) + dns.filter { $0.destination.family == .ipv6 },
                            excluded: (settings.ipv6Settings?.excludedRoutes.map(\.destination) ?? []) + sources.filter { $0.family == .ipv6 },
                            local: settings.excludeLocalNetworks ? Self.localNetworks[.ipv6]! : [],
                            carriers: carrierAddresses)
    }

    static func compute(_ family: IPFamily, included: [Route], excluded: [IPPrefix], local: [IPPrefix] = [],
                        carriers: [IPAddress]) -> FamilyRouting {
        let carrierPrefixes = carriers.filter { $0.family == family }.map {
            IPPrefix(address: $0, length: family.bitWidth)!
        }
        var excludedSet = Set<IPPrefix>()
        var excludedList: [IPPrefix] = []
        for prefix in excluded + carrierPrefixes where excludedSet.insert(prefix).inserted {
            excludedList.append(prefix)
        }
        // A tie (the same prefix included and excluded) goes to the exclusion.
        var seenIncluded = Set<IPPrefix>()
        let kept = included.filter { !excludedSet.contains($0.destination) && seenIncluded.insert($0.destination).inserted }
        // Local networks are excluded as a class, so a prefix the settings
        // include explicitly still goes through the tunnel.
        for prefix in local where !seenIncluded.contains(prefix) && excludedSet.insert(prefix).inserted {
            excludedList.append(prefix)
        }
        // Without any inclusion the family is not routed at all, so its
        // exclusions have nothing to punch holes in.
        if kept.isEmpty {
            return FamilyRouting(family: family, included: [], excluded: [], carriers: [])
        }
        return FamilyRouting(family: family, included: kept, excluded: excludedList,
                             carriers: Set(carrierPrefixes))
    }
}
