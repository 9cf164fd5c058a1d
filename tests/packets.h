// Test helper: frames for BPF_PROG_TEST_RUN (Ethernet, VLAN tags, IPv4/IPv6, IPv6 extension
// headers, fragments, ports, ICMP types, ARP).
#pragma once

#include <arpa/inet.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace shaperctl::test {

struct PacketSpec {
    std::string src = "10.0.0.1", dst = "10.0.0.2";  // IPv6 when they contain ':'
    uint8_t proto = 6;                                 // 6 tcp, 17 udp, 1 icmp, 58 icmpv6
    uint16_t sport = 40000, dport = 80;
    uint8_t dscp = 0;
    uint8_t ecn = 0;              // 0 not ECT, 2 ECT(0), 1 ECT(1), 3 CE
    std::vector<uint16_t> vlans;  // outermost first: 802.1ad for the outer of two, else 802.1Q
    bool first_fragment = false;  // more fragments follow, offset 0
    bool later_fragment = false;  // offset > 0: no L4 header
    uint8_t ipv4_option_words = 0;  // IPv4 options (NOPs), in 4-byte words: IHL 5 + this
    bool ipv6_hop_by_hop = false;   // an 8-byte hop-by-hop options header before the rest
    // More IPv6 extension headers, in order, after hop-by-hop: 51 is AH (24 bytes: a 96-bit
    // ICV), any other type 8 bytes (PadN options).
    std::vector<uint8_t> ipv6_extensions;
    uint8_t icmp_type = 0;  // ICMP or ICMPv6 (proto 1, 58): the message type
    bool arp = false;       // an ARP request (ethertype 0x0806) from src for dst instead of IP
    bool l2 = true;         // false: the frame starts at the network header (tun, WireGuard)
};

inline std::vector<uint8_t> build_frame(const PacketSpec& p)
{
    std::vector<uint8_t> f(p.l2 ? 12 : 0, 0);  // MAC addresses
    auto put16 = [&](uint16_t v) {
        f.push_back(uint8_t(v >> 8));
        f.push_back(uint8_t(v));
    };
    for (size_t i = 0; p.l2 && i < p.vlans.size(); i++) {
        put16(i == 0 && p.vlans.size() > 1 ? 0x88a8 : 0x8100);
        put16(p.vlans[i]);
    }
    const bool v6 = p.src.find(':') != std::string::npos;
    if (p.l2)
        put16(p.arp ? 0x0806 : v6 ? 0x86dd : 0x0800);
    if (p.arp) {
        const uint8_t head[8] = {0, 1, 8, 0, 6, 4, 0, 1};  // Ethernet, IPv4, request
        f.insert(f.end(), head, head + 8);
        uint8_t addr[4];
        f.insert(f.end(), 6, 0x02);
        inet_pton(AF_INET, p.src.c_str(), addr);
        f.insert(f.end(), addr, addr + 4);
        f.insert(f.end(), 6, 0);
        inet_pton(AF_INET, p.dst.c_str(), addr);
        f.insert(f.end(), addr, addr + 4);
        while (f.size() < 64)
            f.push_back(0);
        return f;
    }
    const bool l4 = !p.later_fragment && (p.proto == 6 || p.proto == 17);
    const size_t l4_len = l4 ? 20 : 8;
    if (!v6) {
        const size_t options = size_t(p.ipv4_option_words) * 4;
        uint8_t ip[20] = {uint8_t(0x45 + p.ipv4_option_words), uint8_t(p.dscp << 2 | p.ecn)};
        uint16_t total = htons(uint16_t(20 + options + l4_len));
        std::memcpy(ip + 2, &total, 2);
        uint16_t frag = htons(uint16_t((p.first_fragment ? 0x2000 : 0) | (p.later_fragment ? 100 : 0)));
        std::memcpy(ip + 6, &frag, 2);
        ip[8] = 64;
        ip[9] = p.proto;
        inet_pton(AF_INET, p.src.c_str(), ip + 12);
        inet_pton(AF_INET, p.dst.c_str(), ip + 16);
        f.insert(f.end(), ip, ip + 20);
        f.insert(f.end(), options, 1);  // NOP options
    } else {
        const bool frag = p.first_fragment || p.later_fragment;
        std::vector<uint8_t> chain;  // extension header types, in order
        if (p.ipv6_hop_by_hop)
            chain.push_back(0);
        chain.insert(chain.end(), p.ipv6_extensions.begin(), p.ipv6_extensions.end());
        if (frag)
            chain.push_back(44);
        std::vector<uint8_t> ext;
        for (size_t i = 0; i < chain.size(); i++) {
            const uint8_t next = i + 1 < chain.size() ? chain[i + 1] : p.proto;
            if (chain[i] == 44) {
                uint8_t fh[8] = {next, 0, 0, uint8_t(p.first_fragment ? 1 : 0), 0, 0, 0, 1};
                if (p.later_fragment)
                    fh[2] = 0x01, fh[3] = 0x00;  // offset 32 (in 8-byte units), no MF
                ext.insert(ext.end(), fh, fh + 8);
            } else if (chain[i] == 51) {
                uint8_t ah[24] = {next, 4, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 1};  // (4 + 2) x 4 bytes
                ext.insert(ext.end(), ah, ah + 24);
            } else {
                uint8_t opts[8] = {next, 0, 1, 4, 0, 0, 0, 0};  // PadN over the rest
                ext.insert(ext.end(), opts, opts + 8);
            }
        }
        uint8_t ip[40] = {uint8_t(0x60 | (p.dscp >> 2)), uint8_t((p.dscp & 3) << 6 | p.ecn << 4)};
        uint16_t payload = htons(uint16_t(ext.size() + l4_len));
        std::memcpy(ip + 4, &payload, 2);
        ip[6] = chain.empty() ? p.proto : chain[0];
        ip[7] = 64;
        inet_pton(AF_INET6, p.src.c_str(), ip + 8);
        inet_pton(AF_INET6, p.dst.c_str(), ip + 24);
        f.insert(f.end(), ip, ip + 40);
        f.insert(f.end(), ext.begin(), ext.end());
    }
    std::vector<uint8_t> l4h(l4_len, 0);
    if (l4) {
        l4h[0] = uint8_t(p.sport >> 8), l4h[1] = uint8_t(p.sport);
        l4h[2] = uint8_t(p.dport >> 8), l4h[3] = uint8_t(p.dport);
        if (p.proto == 6)
            l4h[12] = 0x50;
    } else if (!p.later_fragment && (p.proto == 1 || p.proto == 58)) {
        l4h[0] = p.icmp_type;
    }
    f.insert(f.end(), l4h.begin(), l4h.end());
    while (f.size() < 64)
        f.push_back(0);
    return f;
}

}  // namespace shaperctl::test
