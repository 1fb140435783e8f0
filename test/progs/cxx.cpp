// std::vector, std::map and std::string: output must not depend on the
// allocator underneath.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

int main() {
	std::map<std::string, std::vector<long>> m;
	unsigned long r = 42;
	for (int i = 0; i < 200000; i++) {
		r = r * 6364136223846793005ul + 1442695040888963407ul;
		std::string k = "key-" + std::to_string(r % 5000);
		m[k].push_back((long)(r >> 33));
	}
	std::vector<std::string> big;
	for (int i = 0; i < 1000; i++)
		big.emplace_back(std::string(4096 + i, (char)('a' + i % 26)));
	std::vector<long> huge(4 << 20, 7);     // 32 MiB: the huge class
	long sum = 0;
	for (auto &kv : m)
		for (long v : kv.second)
			sum += v % 1000;
	for (auto &s : big)
		sum += (long)s.size() + s[s.size() / 2];
	for (long v : huge)
		sum += v;
	std::printf("keys=%zu sum=%ld first=%s last=%s\n", m.size(), sum,
	    m.begin()->first.c_str(), m.rbegin()->first.c_str());
	return 0;
}
