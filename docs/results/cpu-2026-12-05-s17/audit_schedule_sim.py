"""Session 17: would another order of the audit's problems shorten its wall time? A list-
scheduling model fed by session 13's audit database (250 KernelBench problems on the H200, per
problem: its non-exclusive work, the reference's and the candidate's calls less its timing; its
exclusive timing run; its memory reservation and whether it needs the device alone). Slots run
in parallel within the memory ledger's 75 GB; timing runs stop everyone (the gate); an alone
problem waits for an empty device. Crude (the work figures were measured under contention, the
device's own sharing is not modelled), so only the comparison between orders means anything.
    python3 docs/results/cpu-2026-12-05-s17/audit_schedule_sim.py
"""
import sqlite3, json
db = "docs/results/h200-2026-12-04-s13/call3/audit.sqlite"
P=[]
for p, lvl, pid, rj in sqlite3.connect(db).execute("select problem, level, problem_id, result_json from results"):
    r=json.loads(rj); d=r["durations_s"]; s=d["split"]
    plan=r["problem"]["reference"].get("plan",{})
    E=d.get("timing",0)
    N=max(0.5, s["reference"]+s["candidate"]+s.get("compile",0)-E)
    M=plan.get("working_bytes",0)/1e9; alone=bool(plan.get("alone"))
    P.append(dict(name=p, level=lvl, id=pid, N=N, E=E, M=M, alone=alone))
CAP=75.0
def interleave(ps):
    by={}
    for p in sorted(ps,key=lambda p:(p["level"],p["id"])): by.setdefault(p["level"],[]).append(p)
    out=[]; i=0
    while any(by.values()):
        for l in sorted(by):
            if by[l]: out.append(by[l].pop(0))
    return out
def sim(order, W=4, block_on_alone=True):
    # time-stepped: each running job does N work (shared), then E exclusive (global lock)
    t=0.0; dt=0.05; queue=list(order); run=[]; excl=None; idle_slot=0
    while queue or run:
        # start jobs in order (head of line blocking only for alone)
        started=True
        while started and queue and len(run)<W:
            started=False
            p=queue[0]
            used=sum(j["M"] for j in run)
            if p["alone"]:
                if not run: run.append(dict(p, left=p["N"], eleft=p["E"])); queue.pop(0); started=True
                elif block_on_alone: break
            else:
                if any(j["alone"] for j in run): break
                if used+p["M"]<=CAP or not run:
                    run.append(dict(p, left=p["N"], eleft=p["E"])); queue.pop(0); started=True
                else:
                    # look past the head for a job that fits (the picker takes any open task)
                    for k,q in enumerate(queue[1:],1):
                        if not q["alone"] and used+q["M"]<=CAP:
                            run.append(dict(q,left=q["N"],eleft=q["E"])); queue.pop(k); started=True; break
        # progress
        if excl is None:
            for j in run:
                if j["left"]<=0 and j["eleft"]>0: excl=j; break
        if excl is not None:
            excl["eleft"]-=dt
            if excl["eleft"]<=0: excl=None
        else:
            for j in run: j["left"]-=dt
        run=[j for j in run if not (j["left"]<=0 and j["eleft"]<=0)]
        t+=dt
    return t
base=interleave(P)
print("work N sum %.0f, E sum %.0f"%(sum(p["N"] for p in P), sum(p["E"] for p in P)))
for W in (4,6):
    print("W",W,"interleaved: %.0f"%sim(base,W))
    print("W",W,"alone first, then interleaved: %.0f"%sim([p for p in base if p["alone"]]+[p for p in base if not p["alone"]],W))
    print("W",W,"heavy memory first: %.0f"%sim(sorted(P,key=lambda p:(-p["alone"],-p["M"])),W))
    print("W",W,"LPT: %.0f"%sim(sorted(P,key=lambda p:(-p["alone"],-(p["N"]+p["E"]))),W))
print()
for p in sorted(P,key=lambda p:-p["N"])[:25]: print("%-60s N=%.0f E=%.1f M=%.0f %s"%(p["name"][:60],p["N"],p["E"],p["M"],p["alone"]))
import collections
c=collections.Counter()
for p in P: c[p["level"]]+=p["N"]
print(c)
