import json,sys
def load(p):
    out={}
    for r in json.load(open(p))['results']:
        for b in r.get('baselines',[]):
            out[(r['case'],r['device'],r['bytes'],r.get('shape',''),b['label'])]=b['ratio']
    return out
old=[load('bench/results/2026-11-25-one-decision-cpu-pocl/before-3864651-1.json'),load('bench/results/2026-11-25-one-decision-cpu-pocl/before-3864651-2.json')]
new=[load('bench/results/2026-11-25-one-decision-cpu-pocl/after-4fd13e5-1.json'),load('bench/results/2026-11-25-one-decision-cpu-pocl/after-4fd13e5-2.json')]
keys=[k for k in old[0] if k in new[0]]
want=('host copy','to_device new buffer','H2D existing buffer','D2H existing buffer','H2D new buffer','from another context','py')
print(f"{'case':24} {'dev':8} {'size':>9} {'base':10} {'old':>13} {'new':>13}")
for k in keys:
    if not k[0].startswith(want): continue
    o=[x[k] for x in old if k in x]; n=[x[k] for x in new if k in x]
    size=k[2]; s=f"{size>>20} MiB" if size>=1<<20 else f"{size>>10} KiB" if size>=1024 else f"{size} B"
    print(f"{k[0]:24} {k[1]:8} {s:>9} {k[4]:10} {' '.join(f'{v:.2f}' for v in o):>13} {' '.join(f'{v:.2f}' for v in n):>13}")
