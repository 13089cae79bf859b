import DNSConfig
import LinuxSystem
import Netlink
import Nftables
import TunnelgateSettings

extension Engine {
    /// Applies new settings to a running tunnel by changing only what differs,
    /// as iOS does when setTunnelNetworkSettings is called again: the TUN (and
    /// every packet path bound to it) stays; MTU, addresses, routes, rules,
    /// kernel parameters, the nftables table and DNS change where they differ.
    /// New objects are journaled before they are made. Returns false, changing
    /// nothing, when the difference cannot be applied in place (another
    /// interface name): the caller then takes the tunnel down and up again.
    public func reapply(_ tunnel: ActiveTunnel, _ settings: TunnelSettings, resolver: some HostResolver) throws(EngineError) -> Bool {
        let old = tunnel.plan
        guard settings.name == old.settings.name else { return false }
        try Self.requireResolvedAddresses(settings)
        let carriers: [PinnedCarrier]
        do { carriers = try settings.pinCarrierEndpoints(using: resolver) } catch { throw .configuration(error) }
        let new = TunnelPlan(settings: settings, slot: old.slot, carriers: carriers, carrierIdentity: old.carrierIdentity,
                             isolatedIn: old.isolatedIn)
        let name = settings.name
        let index = tunnel.interfaceIndex

        func key(_ r: RouteSpec) -> RouteKey { RouteKey(destination: r.destination, type: r.type, gateway: r.gateway) }
        let oldRoutes = old.routes(interfaceIndex: index), newRoutes = new.routes(interfaceIndex: index)
        let oldKeys = Set(oldRoutes.map(key)), newKeys = Set(newRoutes.map(key))
        let addedRoutes = newRoutes.filter { !oldKeys.contains(key($0)) }
        let removedRoutes = oldRoutes.filter { !newKeys.contains(key($0)) }
        let addedRules = new.rules.filter { rule in !old.rules.contains { Self.sameRule($0, rule) } }
        let removedRules = old.rules.filter { rule in !new.rules.contains { Self.sameRule($0, rule) } }
        // An address kept whose subnet route changes hands (its family starts or stops being routed)
        // is added again with the new flag: removed first, then added with the others.
        let reflagged = new.addresses.filter { old.addresses.contains($0) && old.ownsSubnetRoute($0) != new.ownsSubnetRoute($0) }
        let addedAddresses = new.addresses.filter { !old.addresses.contains($0) } + reflagged
        let removedAddresses = old.addresses.filter { !new.addresses.contains($0) }

        // Journal first: whatever is about to be made is recorded.
        do throws(SystemCallError) {
            try Journal.append(path: state.journalPath(name), Journal.records(routes: addedRoutes, rules: addedRules))
        } catch { throw .system(error) }

        var ops: [NetlinkOperation] = []
        if new.mtu != old.mtu { ops.append(.setLink(index: index, name: name, mtu: UInt32(new.mtu), up: true)) }
        ops += reflagged.map { .deleteAddress(old.addressSpec($0, interfaceIndex: index)) }
        ops += addedAddresses.map { .addAddress(new.addressSpec($0, interfaceIndex: index)) }
        ops += addedRoutes.map { .addRoute($0) }
        ops += addedRules.map { .addRule($0) }
        ops += removedRules.map { .deleteRule($0) }
        ops += removedRoutes.map { .deleteRoute($0) }
        ops += removedAddresses.map { .deleteAddress(old.addressSpec($0, interfaceIndex: index)) }
        do throws(NetlinkBatchError) {
            try netlink.execute(ops, tolerating: [.exists, .noSuchEntry, .noSuchProcess, .addressNotAvailable])
        } catch {
            throw .apply(error, rolledBack: false)
        }

        // Kernel parameters the new settings need (journaled as at up).
        do throws(SystemCallError) {
            guard let journal = try Journal.reopen(path: state.journalPath(name)) else {
                throw SystemCallError("open(\(state.journalPath(name)))", .noSuchEntry)
            }
            try applySysctls(new.sysctls.filter { !old.sysctls.contains($0) }, journal: journal)
        } catch { throw .system(error) }

        // The nftables table: replaced as a whole, or removed, in one transaction.
        if new.firewall != old.firewall {
            if let table = new.firewall {
                do throws(SystemCallError) { try Journal.append(path: state.journalPath(name), ["nft inet \(table.name)"]) } catch {
                    throw .system(error)
                }
            }
            do throws(NftablesError) {
                if let table = new.firewall {
                    try nftables?.replace(table)
                } else if let table = old.firewall {
                    try nftables?.delete(table: table.name)
                }
            } catch {
                throw .firewall(error, rolledBack: false)
            }
        }

        // DNS: put the old back and apply the new when they differ.
        if new.settings.dnsSettings != old.settings.dnsSettings {
            try? tunnel.dns?.forwarder?.stop()
            tunnel.dns = nil
            let problems = restoreDNS(name)
            guard problems.isEmpty else { throw .dns(problems.joined(separator: "; "), rolledBack: false) }
            if let dnsSettings = new.settings.dnsSettings {
                do throws(DNSConfigError) {
                    tunnel.dns = try inTunnelNamespace { () throws(DNSConfigError) in
                        try DNSConfigurator().apply(settings: dnsSettings, interfaceName: name, interfaceIndex: index,
                                                    stateDirectory: state.path, tunnelName: name)
                    }
                    try tunnel.dns?.forwarder?.start()
                } catch {
                    throw .dns(error.description, rolledBack: false)
                }
            }
        }

        // Proxy files: written again (journaled) or removed when they differ.
        if new.settings.proxy != old.settings.proxy {
            do throws(SystemCallError) {
                let written = try applyProxy(new.settings.proxy, name: name, previous: tunnel.record.proxy)
                tunnel.publish(proxy: written)
            } catch { throw .system(error) }
        }

        tunnel.plan = new
        let problems = verify(new, interfaceIndex: index)
        guard problems.isEmpty else { throw .verification(problems, rolledBack: false) }
        return true
    }
}

/// A route's identity apart from the interface index.
struct RouteKey: Hashable {
    var destination: IPPrefix
    var type: RouteType
    var gateway: IPAddress?
}
